package natsbus

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The streams and consumers orderpay owns are kept in shape by the upkeep, in the
// background: it creates what is missing and updates only what orderpay owns, and never
// lowers what an operator raised (replicas, retention limits, the duplicate window, a
// consumer's ack wait or pending limit). An existing stream is used as it is; its update,
// if it needs one, comes after the bus is ready and may fail without harm (it is tried
// again later). See planStreamUpdate for the rules.

// Upkeep timing: a failed pass is retried after a wait that doubles from upkeepRetryMin to
// upkeepRetryMax; a good one is repeated every upkeepInterval (to notice a stream deleted
// or made again under us) and at every reconnect.
const (
	upkeepRetryMin = 250 * time.Millisecond
	upkeepRetryMax = 10 * time.Second
	upkeepInterval = 30 * time.Second
	// apiTimeout bounds one JetStream API call of the upkeep or an attachment: a stream
	// whose leader just died answers once a new one is elected, within seconds.
	apiTimeout = 5 * time.Second
	// lostStreamSettle is how long a stream this bus had seen must stay missing before
	// the upkeep makes it again. The server removes a deleted stream from its list before
	// it removes the stream's directory; a stream created by the same name in between
	// has its new directory removed under it and never answers a publish again (seen in
	// NATS server 2.15: the upkeep, poked by the consumer's deletion, won that race).
	lostStreamSettle = 2 * time.Second
)

// Metadata keys on orderpay's streams: the limits orderpay last asked for. A limit that
// still has that value is orderpay's to change; any other value was set by an operator,
// and orderpay only ever raises it.
const (
	metaReplicas   = "orderpay.replicas"
	metaMaxAge     = "orderpay.max_age"
	metaMaxBytes   = "orderpay.max_bytes"
	metaDuplicates = "orderpay.duplicate_window"
)

// legacyLimits are the limits of a stream made by an orderpay from before the metadata:
// one replica, no age or size limit, and the default duplicate window. A stream without
// the metadata that still has these values has them from orderpay, not from an operator.
var legacyLimits = map[string]string{
	metaReplicas:   "1",
	metaMaxAge:     "0s",
	metaMaxBytes:   "-1",
	metaDuplicates: DefaultDuplicateWindow.String(),
}

// poke asks the upkeep for a pass now, without blocking.
func (b *Bus) poke() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// upkeep keeps the streams in shape for as long as the bus is open.
func (b *Bus) upkeep() {
	defer b.bgWG.Done()
	wait := time.Duration(0)
	failures := 0
	for {
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-b.bg.Done():
				t.Stop()
				return
			case <-b.kick:
			case <-t.C:
			}
			t.Stop()
		}
		if b.bg.Err() != nil {
			return
		}
		if !b.nc.IsConnected() {
			b.setNotReady(errors.New("not connected to NATS"))
			wait = upkeepInterval // the connect and reconnect handlers poke
			continue
		}
		ctx, cancel := context.WithTimeout(b.bg, 4*apiTimeout)
		err := b.ensureStreams(ctx)
		cancel()
		if err == nil {
			failures, wait = 0, upkeepInterval
			continue
		}
		if b.bg.Err() != nil {
			return
		}
		failures++
		wait = min(upkeepRetryMin<<min(failures-1, 10), upkeepRetryMax)
		b.log.Warn("bus not ready; retrying", "failures", failures, "retry_in", wait, "err", err)
	}
}

// ensureStreams makes sure every stream exists, marks the bus ready if they do, then
// brings them to the configuration orderpay owns. It fails only when a stream is missing
// and cannot be created (or cannot be read): a failed update leaves a usable stream, is
// logged, and is tried again at the next pass.
func (b *Bus) ensureStreams(ctx context.Context) error {
	replicas, err := b.resolveReplicas()
	if err != nil {
		b.setNotReady(err)
		return err
	}
	wants := b.streamConfigs(replicas)
	existing := make([]jetstream.StreamConfig, len(wants))
	for i, want := range wants {
		have, err := b.ensureStream(ctx, want)
		if err != nil {
			b.setNotReady(err)
			return err
		}
		existing[i] = have
	}
	b.setReady()
	for i, want := range wants {
		b.updateStream(ctx, existing[i], want)
	}
	b.passes.Add(1)
	return nil
}

// ensureStream returns the stream's configuration as it is on the server, creating the
// stream if it is missing. It also notices a stream made again since it was first seen.
func (b *Bus) ensureStream(ctx context.Context, want jetstream.StreamConfig) (jetstream.StreamConfig, error) {
	for range 2 { // a create can lose the race to another instance: read again
		actx, cancel := context.WithTimeout(ctx, apiTimeout)
		s, err := b.js.Stream(actx, want.Name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			if wait := b.missingFor(want.Name); wait > 0 {
				cancel()
				return jetstream.StreamConfig{}, fmt.Errorf("stream %s: lost; made again once it has been missing for %s (%s more)", want.Name, lostStreamSettle, wait)
			}
			s, err = b.js.CreateStream(actx, want)
			if err == nil {
				b.log.Info("stream created", "stream", want.Name, "replicas", want.Replicas, "max_age", want.MaxAge, "max_bytes", want.MaxBytes)
			}
		}
		cancel()
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			continue
		}
		if err != nil {
			return jetstream.StreamConfig{}, fmt.Errorf("stream %s: %w", want.Name, err)
		}
		info := s.CachedInfo()
		b.noticeRecreated(want.Name, info.Created)
		return info.Config, nil
	}
	return jetstream.StreamConfig{}, fmt.Errorf("stream %s: created and deleted under us", want.Name)
}

// missingFor notes that stream name was found missing and returns how much longer it must
// stay missing before it is made again: zero for a stream this bus has never seen (its
// first creation), and for one missing since lostStreamSettle or longer.
func (b *Bus) missingFor(name string) time.Duration {
	b.state.Lock()
	defer b.state.Unlock()
	if _, seen := b.created[name]; !seen {
		return 0
	}
	if b.missing == nil {
		b.missing = map[string]time.Time{}
	}
	since, ok := b.missing[name]
	if !ok {
		since = time.Now()
		b.missing[name] = since
	}
	return max(lostStreamSettle-time.Since(since), 0)
}

// firstTime reports whether this bus sees key for the first time.
func (b *Bus) firstTime(key string) bool {
	b.state.Lock()
	defer b.state.Unlock()
	if b.seen == nil {
		b.seen = map[string]bool{}
	}
	first := !b.seen[key]
	b.seen[key] = true
	return first
}

// noticeRecreated logs, loudly, a stream created again since this bus first saw it: what
// it held is gone, and events already marked published are not sent again.
func (b *Bus) noticeRecreated(name string, created time.Time) {
	b.state.Lock()
	if b.created == nil {
		b.created = map[string]time.Time{}
	}
	before, seen := b.created[name]
	b.created[name] = created
	delete(b.missing, name)
	b.state.Unlock()
	if seen && !before.Equal(created) {
		b.log.Error("stream was made again: the messages it held are lost, and consumers that had not read them never will (a single-replica stream on a node that lost its store, or a delete)",
			"stream", name, "created_before", before, "created_now", created)
	}
}

// updateStream updates the stream to want where orderpay owns the difference, and logs
// what it keeps of an operator's.
func (b *Bus) updateStream(ctx context.Context, have, want jetstream.StreamConfig) {
	upd, changes, kept := planStreamUpdate(have, want)
	for _, k := range kept {
		if b.firstTime("stream " + want.Name + ": " + k) { // once per start, not every pass
			b.log.Warn("stream changed by an operator: kept", "stream", want.Name, "kept", k)
		}
	}
	if len(changes) == 0 {
		return
	}
	actx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	if _, err := b.js.UpdateStream(actx, upd); err != nil {
		b.log.Warn("stream update deferred; the stream is used as it is", "stream", want.Name, "changes", changes, "err", err)
		return
	}
	b.log.Info("stream updated", "stream", want.Name, "changes", changes)
}

// planStreamUpdate returns have with orderpay's part brought to want, what that changes
// ("" when nothing), and what it keeps of an operator's. Start from have keeps every field
// orderpay does not own (placement, description, sources, compression...).
//
// The limits (replicas, max age, max bytes, duplicate window) follow one rule: orderpay's
// value is a floor. A value below want is raised to it; a value above is kept, unless it
// is exactly what orderpay asked for last time (in the stream's metadata), which makes it
// orderpay's own, to lower when its configuration is lowered. The subjects orderpay needs
// are added, never removed; schedules and roll-ups are turned on; the discard policy is
// orderpay's. Storage and retention cannot change in place: a difference is only logged.
func planStreamUpdate(have, want jetstream.StreamConfig) (upd jetstream.StreamConfig, changes, kept []string) {
	upd = have
	upd.Metadata = make(map[string]string, len(have.Metadata)+4)
	for k, v := range have.Metadata {
		upd.Metadata[k] = v
	}
	recorded := func(key string) string {
		if v, ok := have.Metadata[key]; ok {
			return v
		}
		if _, ok := have.Metadata[metaReplicas]; !ok {
			return legacyLimits[key]
		}
		return ""
	}
	limits := []struct {
		key        string
		have, want int64
		set        func(int64)
		show       func(int64) string
	}{
		{metaReplicas, int64(have.Replicas), int64(want.Replicas), func(v int64) { upd.Replicas = int(v) }, showInt},
		{metaMaxAge, int64(have.MaxAge), int64(want.MaxAge), func(v int64) { upd.MaxAge = time.Duration(v) }, showAge},
		{metaMaxBytes, have.MaxBytes, want.MaxBytes, func(v int64) { upd.MaxBytes = v }, showBytes},
		{metaDuplicates, int64(have.Duplicates), int64(want.Duplicates), func(v int64) { upd.Duplicates = time.Duration(v) }, showAge},
	}
	recording := false
	for _, l := range limits {
		mine := l.show(l.want)
		if upd.Metadata[l.key] != mine {
			upd.Metadata[l.key] = mine
			recording = true
		}
		h, w := unlimited(l.key, l.have), unlimited(l.key, l.want)
		switch {
		case h == w:
		case h < w || l.show(l.have) == recorded(l.key):
			l.set(l.want)
			changes = append(changes, fmt.Sprintf("%s %s → %s", strings.TrimPrefix(l.key, "orderpay."), l.show(l.have), mine))
		default:
			kept = append(kept, fmt.Sprintf("%s %s (orderpay would set %s)", strings.TrimPrefix(l.key, "orderpay."), l.show(l.have), mine))
		}
	}
	if recording {
		changes = append(changes, "orderpay's limits recorded in the metadata")
	}
	for _, s := range want.Subjects {
		if !slices.Contains(upd.Subjects, s) {
			upd.Subjects = append(slices.Clone(upd.Subjects), s)
			changes = append(changes, "subject "+s+" added")
		}
	}
	if !have.AllowMsgSchedules && want.AllowMsgSchedules {
		upd.AllowMsgSchedules = true
		changes = append(changes, "schedules allowed")
	}
	if !have.AllowRollup && want.AllowRollup {
		upd.AllowRollup = true
		changes = append(changes, "roll-ups allowed")
	}
	if have.Discard != want.Discard {
		upd.Discard = want.Discard
		changes = append(changes, "discard "+want.Discard.String())
	}
	if have.Storage != want.Storage {
		kept = append(kept, fmt.Sprintf("storage %s (orderpay would use %s; it cannot change in place)", have.Storage, want.Storage))
	}
	if have.Retention != want.Retention {
		kept = append(kept, fmt.Sprintf("retention %s (orderpay would use %s; it cannot change in place)", have.Retention, want.Retention))
	}
	if len(changes) == 0 {
		upd = have
	}
	return upd, changes, kept
}

// unlimited orders limit values: a limit of 0 or less (no limit) is above any other.
// Replicas are never 0 on the server.
func unlimited(key string, v int64) int64 {
	if key != metaReplicas && v <= 0 {
		return 1<<63 - 1
	}
	return v
}

func showInt(v int64) string { return strconv.FormatInt(v, 10) }
func showAge(v int64) string { return time.Duration(v).String() }
func showBytes(v int64) string {
	if v <= 0 {
		return "-1"
	}
	return strconv.FormatInt(v, 10)
}

// resolveReplicas returns Config.Replicas, or detects it at the first connected pass
// (Config.Replicas documents how) and keeps it for the life of the bus.
func (b *Bus) resolveReplicas() (int, error) {
	b.state.Lock()
	defer b.state.Unlock()
	if b.replicas > 0 {
		return b.replicas, nil
	}
	switch {
	case b.cfg.Replicas > 0:
		b.replicas = b.cfg.Replicas
	case b.srv != nil:
		b.replicas = 1
	case !b.nc.IsConnected():
		return 0, errors.New("not connected to NATS")
	default:
		b.replicas = detectReplicas(b.nc.ConnectedClusterName(), b.nc.Servers())
		b.log.Info("stream replicas detected", "replicas", b.replicas, "cluster", b.nc.ConnectedClusterName(), "servers", len(b.nc.Servers()))
	}
	return b.replicas, nil
}

// detectReplicas is 1 for a server in no cluster, else the number of distinct servers
// known (configured and announced by the cluster), at most DefaultClusterReplicas.
func detectReplicas(cluster string, servers []string) int {
	if cluster == "" {
		return 1
	}
	hosts := map[string]bool{}
	for _, s := range servers {
		if u, err := url.Parse(s); err == nil && u.Host != "" {
			hosts[u.Host] = true
		}
	}
	return min(max(len(hosts), 1), DefaultClusterReplicas)
}

// Replicas returns the replica count of the streams: Config.Replicas, or what was detected
// at connect; 0 until the first connect.
func (b *Bus) Replicas() int {
	b.state.Lock()
	defer b.state.Unlock()
	return b.replicas
}

// streamConfigs are the streams orderpay owns, as it wants them.
func (b *Bus) streamConfigs(replicas int) []jetstream.StreamConfig {
	return []jetstream.StreamConfig{b.eventStreamConfig(replicas), b.timerStreamConfig(replicas)}
}

func (b *Bus) eventStreamConfig(replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:     b.cfg.Stream,
		Subjects: b.cfg.Subjects,
		// Events are the record of what happened; they must survive a restart.
		Storage:  jetstream.FileStorage,
		Replicas: replicas,
		// Limits retention: several consumers (order system, points, SMS) read the
		// same events independently, and an operator can replay them, within MaxAge and
		// MaxBytes; the oldest go first.
		Retention:  jetstream.LimitsPolicy,
		Discard:    jetstream.DiscardOld,
		MaxAge:     serverAge(b.cfg.MaxAge),
		MaxBytes:   serverBytes(b.cfg.MaxBytes),
		Duplicates: b.cfg.DuplicateWindow,
		// Schedules need roll-ups; the server would turn them on by itself, so say it
		// here to keep the config we send equal to the one stored.
		AllowMsgSchedules: true,
		AllowRollup:       true,
		Metadata:          limitsMetadata(replicas, serverAge(b.cfg.MaxAge), serverBytes(b.cfg.MaxBytes), b.cfg.DuplicateWindow),
	}
}

// limitsMetadata records the limits orderpay asks for (see metaReplicas).
func limitsMetadata(replicas int, maxAge time.Duration, maxBytes int64, dup time.Duration) map[string]string {
	return map[string]string{
		metaReplicas:   showInt(int64(replicas)),
		metaMaxAge:     showAge(int64(maxAge)),
		metaMaxBytes:   showBytes(maxBytes),
		metaDuplicates: showAge(int64(dup)),
	}
}

// serverAge and serverBytes turn Config's "negative is unlimited" into the server's
// encoding (0 and -1).
func serverAge(d time.Duration) time.Duration { return max(d, 0) }
func serverBytes(n int64) int64 {
	if n <= 0 {
		return -1
	}
	return n
}

// ---- consumers ----

// ensureConsumer returns the durable consumer want.Durable on stream, creating it if it
// is missing and updating what orderpay owns of it (planConsumerUpdate). A failed update
// leaves the consumer as it is, usable.
func (b *Bus) ensureConsumer(ctx context.Context, stream string, want jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	for range 2 {
		actx, cancel := context.WithTimeout(ctx, apiTimeout)
		c, err := b.js.Consumer(actx, stream, want.Durable)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			c, err = b.js.CreateConsumer(actx, stream, want)
			if errors.Is(err, jetstream.ErrConsumerExists) {
				cancel()
				continue
			}
		} else if err == nil {
			upd, changes, kept := planConsumerUpdate(c.CachedInfo().Config, want, b.Replicas())
			for _, k := range kept {
				b.log.Warn("consumer changed by an operator: kept", "stream", stream, "consumer", want.Durable, "kept", k)
			}
			if len(changes) > 0 {
				if uc, uerr := b.js.UpdateConsumer(actx, stream, upd); uerr != nil {
					b.log.Warn("consumer update deferred; the consumer is used as it is", "consumer", want.Durable, "changes", changes, "err", uerr)
				} else {
					c = uc
					b.log.Info("consumer updated", "consumer", want.Durable, "changes", changes)
				}
			}
		}
		cancel()
		if err != nil {
			return nil, fmt.Errorf("consumer %s on %s: %w", want.Durable, stream, err)
		}
		return c, nil
	}
	return nil, fmt.Errorf("consumer %s on %s: created and deleted under us", want.Durable, stream)
}

// planConsumerUpdate is planStreamUpdate's rule for consumers: the filter and the delivery
// limit are orderpay's; the ack wait and the pending limit are floors (a larger value is
// an operator's, kept); replicas are the stream's (0), unless an operator set at least
// floorReplicas. The ack and deliver policies cannot change: a difference is logged.
func planConsumerUpdate(have, want jetstream.ConsumerConfig, floorReplicas int) (upd jetstream.ConsumerConfig, changes, kept []string) {
	upd = have
	if have.FilterSubject != want.FilterSubject {
		upd.FilterSubject = want.FilterSubject
		changes = append(changes, fmt.Sprintf("filter %q → %q", have.FilterSubject, want.FilterSubject))
	}
	if have.MaxDeliver != want.MaxDeliver {
		upd.MaxDeliver = want.MaxDeliver
		changes = append(changes, fmt.Sprintf("max deliver %d → %d", have.MaxDeliver, want.MaxDeliver))
	}
	switch {
	case have.AckWait < want.AckWait:
		upd.AckWait = want.AckWait
		changes = append(changes, fmt.Sprintf("ack wait %s → %s", have.AckWait, want.AckWait))
	case have.AckWait > want.AckWait:
		kept = append(kept, fmt.Sprintf("ack wait %s (orderpay would set %s)", have.AckWait, want.AckWait))
	}
	if want.MaxAckPending > 0 {
		switch {
		case have.MaxAckPending > 0 && have.MaxAckPending < want.MaxAckPending:
			upd.MaxAckPending = want.MaxAckPending
			changes = append(changes, fmt.Sprintf("max ack pending %d → %d", have.MaxAckPending, want.MaxAckPending))
		case have.MaxAckPending > want.MaxAckPending || have.MaxAckPending < 0:
			kept = append(kept, fmt.Sprintf("max ack pending %d (orderpay would set %d)", have.MaxAckPending, want.MaxAckPending))
		}
	}
	if have.Replicas != 0 && have.Replicas < floorReplicas {
		upd.Replicas = 0
		changes = append(changes, fmt.Sprintf("replicas %d → the stream's", have.Replicas))
	}
	if have.AckPolicy != want.AckPolicy {
		kept = append(kept, fmt.Sprintf("ack policy %s (orderpay would use %s; it cannot change in place)", have.AckPolicy, want.AckPolicy))
	}
	if have.DeliverPolicy != want.DeliverPolicy {
		kept = append(kept, fmt.Sprintf("deliver policy %s (orderpay would use %s; it cannot change in place)", have.DeliverPolicy, want.DeliverPolicy))
	}
	return upd, changes, kept
}

// ---- readiness ----

// Ready returns nil when the bus is connected, its streams exist and every subscription is
// attached to its consumer; otherwise an error that says what is missing.
func (b *Bus) Ready() error {
	if !b.nc.IsConnected() {
		return errors.New("not connected to NATS")
	}
	b.state.Lock()
	ready, why := b.ready, b.notReady
	b.state.Unlock()
	if !ready {
		return why
	}
	b.mu.Lock()
	var waiting []string
	for a := range b.subs {
		if err := a.notAttached(); err != nil {
			waiting = append(waiting, err.Error())
		}
	}
	b.mu.Unlock()
	if len(waiting) > 0 {
		slices.Sort(waiting)
		return errors.New(strings.Join(waiting, "; "))
	}
	return nil
}

// WaitReady waits until the streams exist (Ready may still report a subscription that is
// attaching), or ctx ends.
func (b *Bus) WaitReady(ctx context.Context) error {
	for {
		b.state.Lock()
		ready, ch := b.ready, b.readyCh
		b.state.Unlock()
		if ready && b.nc.IsConnected() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("natsbus: not ready: %w (%v)", ctx.Err(), b.Ready())
		case <-ch:
		case <-time.After(100 * time.Millisecond): // reconnected without a pass yet
		}
	}
}

// OnReady registers f to run (in its own goroutine) each time the bus becomes ready: the
// relay uses it to publish what the outbox kept while the bus was down at once.
func (b *Bus) OnReady(f func()) {
	b.state.Lock()
	defer b.state.Unlock()
	b.onReady = append(b.onReady, f)
}

func (b *Bus) setReady() {
	b.state.Lock()
	if b.ready {
		b.state.Unlock()
		return
	}
	b.ready, b.notReady = true, nil
	close(b.readyCh)
	fs := slices.Clone(b.onReady)
	b.state.Unlock()
	b.log.Info("bus ready", "stream", b.cfg.Stream, "replicas", b.Replicas())
	for _, f := range fs {
		go f()
	}
}

func (b *Bus) setNotReady(why error) {
	b.state.Lock()
	defer b.state.Unlock()
	if b.ready {
		b.readyCh = make(chan struct{})
	}
	b.ready, b.notReady = false, why
}
