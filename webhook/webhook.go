// Package webhook sends the payment center's results to business systems as signed HTTP
// webhooks (docs/design.md §5 "Downstream events").
//
// A consumer of the bus (Handle) turns each payment.succeeded, payment.closed and
// refund.succeeded message into one delivery row per subscriber, idempotently: the row's
// key is (message id, subscriber), and message ids are deterministic, so a redelivered or
// re-published message adds nothing. The message was written to the outbox in the same
// transaction as the result, so no result is without its deliveries.
//
// A worker (Dispatch, or RunOnce) POSTs the due rows. A 2xx ends a delivery; anything else
// (a timeout, a refused connection, a 500, a redirect, which is never followed) is retried
// on Schedule, 15 s … 6 h, the cadence WeChat Pay uses for its own notifications; after the
// last retry fails the delivery is FAILED (dead), counted, and waits for an operator.
// Resend posts a delivery once more at once, whatever its status.
//
// Subscribers are isolated from each other: each has its own lane, at most
// PerSubscriber attempts at once, paused for a while after a failed attempt (a backoff
// that doubles, up to the schedule's first wait, and ends at its next 2xx), so that a slow
// or failing receiver delays only its own deliveries. A webhook is never posted to an
// internal address (target.go) unless the operator allows its network.
//
// Every request is signed: HeaderSignature is an HMAC-SHA256 over the timestamp, the
// delivery's id and the body, and a receiver checks it, and that the timestamp is within
// Tolerance, with Verify.
package webhook

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"orderpay"
)

// Status of a delivery.
type Status string

const (
	StatusPending   Status = "PENDING"   // not yet answered with a 2xx; due at NextAt
	StatusSucceeded Status = "SUCCEEDED" // a 2xx was received
	StatusFailed    Status = "FAILED"    // dead: every scheduled attempt failed
)

// Event is what moves a delivery.
type Event string

const (
	EventRetry   Event = "retry"   // a scheduled attempt failed; another is due
	EventDeliver Event = "deliver" // a scheduled attempt was answered 2xx
	EventGiveUp  Event = "give_up" // the last scheduled attempt failed: dead
	EventResend  Event = "resend"  // an operator's resend was answered 2xx
)

// DeliveryMachine is a delivery's transition table. An operator's resend that is answered
// 2xx delivers it from any state; one that fails moves nothing.
var DeliveryMachine = orderpay.NewMachine("webhook delivery", []orderpay.Transition[Status, Event]{
	{From: StatusPending, Event: EventRetry, To: StatusPending},
	{From: StatusPending, Event: EventDeliver, To: StatusSucceeded},
	{From: StatusPending, Event: EventGiveUp, To: StatusFailed},
	{From: StatusPending, Event: EventResend, To: StatusSucceeded},
	{From: StatusFailed, Event: EventResend, To: StatusSucceeded},
	{From: StatusSucceeded, Event: EventResend, To: StatusSucceeded},
})

// ScheduledEvent is the event of a scheduled attempt that leaves a PENDING delivery in
// state to ("" for none).
func ScheduledEvent(to Status) Event {
	switch to {
	case StatusPending:
		return EventRetry
	case StatusSucceeded:
		return EventDeliver
	case StatusFailed:
		return EventGiveUp
	}
	return ""
}

// Kinds of attempt.
const (
	KindSchedule = "schedule"
	KindResend   = "resend"
)

// Subjects are the payment center's results that go out as webhooks.
var Subjects = []string{orderpay.SubjectPaymentSucceeded, orderpay.SubjectPaymentClosed, orderpay.SubjectRefundSucceeded}

// ScheduleDefault is the wait before each retry after a failed attempt: the first attempt
// is made at once, then 15 more, after 15s, 15s, 30s, 3m, 10m, 20m, 30m, 30m, 30m, 60m,
// 3h, 3h, 3h, 6h and 6h (24 h 4 min in all).
var ScheduleDefault = []time.Duration{15 * time.Second, 15 * time.Second, 30 * time.Second, 3 * time.Minute,
	10 * time.Minute, 20 * time.Minute, 30 * time.Minute, 30 * time.Minute, 30 * time.Minute, 60 * time.Minute,
	3 * time.Hour, 3 * time.Hour, 3 * time.Hour, 6 * time.Hour, 6 * time.Hour}

// Delivery is one event to one subscriber.
type Delivery struct {
	ID         int64
	MsgID      string // the outbox message's id, e.g. payment.succeeded:P…
	Subscriber string // the subscriber's Name
	Subject    string
	Payload    []byte // the exact body sent on every attempt
	OrderNo    string
	PaymentNo  string
	Status     Status
	// Attempts counts the scheduled attempts made (resends are not counted: they do not
	// move the schedule).
	Attempts    int
	NextAt      time.Time
	LastStatus  int    // the HTTP status of the last attempt, 0 if none came back
	LastError   string // why the last attempt failed, "" if it did not
	CreatedAt   time.Time
	UpdatedAt   time.Time
	DeliveredAt time.Time // the first 2xx, zero until then
}

// Attempt is one POST of a delivery.
type Attempt struct {
	Seq        int64
	DeliveryID int64
	Kind       string // KindSchedule or KindResend
	HTTPStatus int
	Error      string
	At         time.Time
}

// AttemptRecord is an attempt and what it does to its delivery.
type AttemptRecord struct {
	Attempt
	// Before is the delivery's Attempts when a scheduled attempt was claimed; the delivery
	// is updated only if it is still PENDING with that many (another worker may have taken
	// the step, or a resend may have delivered it). Ignored for a resend.
	Before int
	// Status and NextAt are the delivery's after a scheduled attempt. A resend sets
	// SUCCEEDED on a 2xx and leaves the status alone otherwise.
	Status Status
	NextAt time.Time
}

// Filter narrows a listing; empty fields match everything.
type Filter struct {
	Status    Status
	PaymentNo string
	OrderNo   string
}

// Store keeps the deliveries (sqlstore.Store implements it on the tables of migration
// 0012). Every write is one transaction.
type Store interface {
	// CreateDelivery inserts d (setting its ID) unless (MsgID, Subscriber) exists, and
	// reports whether it did.
	CreateDelivery(ctx context.Context, d *Delivery) (bool, error)
	// Delivery returns one delivery and its attempts, oldest first; ENOTFOUND if absent.
	Delivery(ctx context.Context, id int64) (*Delivery, []Attempt, error)
	// Deliveries lists deliveries, newest first, at most limit.
	Deliveries(ctx context.Context, f Filter, limit int) ([]Delivery, error)
	// DueDeliveries lists PENDING deliveries due at or before at, oldest due first, except
	// those of the subscribers named in skip (busy or paused: their rows wait, and take no
	// room from the others').
	DueDeliveries(ctx context.Context, at time.Time, limit int, skip []string) ([]Delivery, error)
	// ClaimDelivery moves NextAt of a PENDING delivery that has had exactly attempts
	// scheduled attempts to until, a lease that keeps other workers (and instances) off it
	// while it is posted; it reports whether it did.
	ClaimDelivery(ctx context.Context, id int64, attempts int, until, at time.Time) (bool, error)
	// RecordAttempt stores an attempt and applies it to its delivery (see AttemptRecord),
	// and reports whether the delivery changed. The attempt is stored either way: the POST
	// happened.
	RecordAttempt(ctx context.Context, r AttemptRecord) (bool, error)
	// EnsureSubscriber records that subscriber receives the events written from since on,
	// unless it is recorded already, and returns the time it is recorded with.
	EnsureSubscriber(ctx context.Context, subscriber string, since time.Time) (time.Time, error)
	// OutboxMessages lists the outbox's messages of the subjects written at or after since,
	// oldest first, after sequence number after, at most limit (Replay's source).
	OutboxMessages(ctx context.Context, subjects []string, since time.Time, after int64, limit int) ([]OutboxMessage, error)
}

// OutboxMessage is one message as the outbox keeps it, with its place in it.
type OutboxMessage struct {
	orderpay.Message
	Seq int64
}

// Subscriber is a business system that receives every result.
type Subscriber struct {
	URL    string
	Secret []byte
	// Key, if set, is the subscriber's Name: an app's subscribers are named after their
	// app (a Router's).
	Key string
}

// Name is how a subscriber is known in rows, logs and metrics: its Key, or its URL without
// user information, query or fragment, which may carry credentials.
func (s Subscriber) Name() string {
	if s.Key != "" {
		return s.Key
	}
	return URLName(s.URL)
}

// URLName is a URL without user information, query or fragment.
func URLName(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "invalid-url"
	}
	return u.Scheme + "://" + u.Host + u.Path
}

// Masked stands for a credential a URL carries.
const Masked = "***"

// MaskURL is a URL as anyone but the admin who edits it may see it: its user information
// (user:password@), the value of each query parameter and any bare query word are replaced
// with Masked, and its fragment dropped; scheme, host, port and path are kept, so that it
// can still be told apart. A URL that cannot be read is "invalid-url".
func MaskURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "invalid-url"
	}
	var b strings.Builder
	b.WriteString(u.Scheme + "://")
	if u.User != nil {
		b.WriteString(Masked + "@")
	}
	b.WriteString(u.Host + u.EscapedPath())
	if u.RawQuery != "" || u.ForceQuery {
		b.WriteByte('?')
		for i, part := range strings.Split(u.RawQuery, "&") {
			if i > 0 {
				b.WriteByte('&')
			}
			if key, _, ok := strings.Cut(part, "="); ok {
				b.WriteString(key + "=" + Masked)
			} else {
				b.WriteString(Masked) // a bare token
			}
		}
	}
	return b.String()
}

// Observer hears deliveries, for metrics. NopObserver is the default.
type Observer interface {
	// WebhookAttempt: an attempt of kind to subscriber was "delivered" (2xx) or "failed".
	WebhookAttempt(subscriber, kind, result string)
	// WebhookDead: a delivery's schedule ran out; it needs an operator.
	WebhookDead(subscriber string)
}

// NopObserver observes nothing.
type NopObserver struct{}

func (NopObserver) WebhookAttempt(string, string, string) {}
func (NopObserver) WebhookDead(string)                    {}

// Router sends the results of business apps to the apps alone (package apppay): each
// app's events to its own subscribers, signed with its own secret.
type Router interface {
	// Route says who receives m. owned false: m is none of the router's, and goes to the
	// configured subscribers if it is a payment-center result. owned true: m goes to subs
	// only (none, possibly), as an event of type kind with data as its payload.
	Route(ctx context.Context, m orderpay.Message) (subs []Subscriber, kind string, data []byte, owned bool, err error)
	// Subscriber finds a subscriber Route named, for an attempt or a resend.
	Subscriber(ctx context.Context, name string) (Subscriber, bool, error)
}

// Config configures a Service.
type Config struct {
	Store       Store
	Subscribers []Subscriber
	// Router routes the apps' results. Optional.
	Router Router
	// Schedule is the wait before each retry. Defaults to ScheduleDefault.
	Schedule []time.Duration
	// Client posts the webhooks. Defaults to NewClient with a 10 s timeout and
	// AllowNetworks: no internal address, no redirect. A client given here is used as it
	// is, except that it follows no redirect.
	Client *http.Client
	// AllowNetworks are the networks webhooks may reach although they are internal
	// (loopback, private, link-local…: CheckAddr). Defaults to none.
	AllowNetworks []netip.Prefix
	// Lease is how long a claimed delivery is kept from other workers while it is posted;
	// it must exceed the client's timeout. Defaults to 1 minute.
	Lease time.Duration
	// Batch bounds the deliveries one run takes. Defaults to 100.
	Batch int
	// Workers bounds the attempts in flight, all subscribers together. Defaults to 64.
	Workers int
	// PerSubscriber bounds one subscriber's attempts in flight, so that a slow receiver
	// holds no more than that many of the Workers. Defaults to 2.
	PerSubscriber int
	// Created is called after Handle stored new deliveries, to wake the worker. Optional.
	Created func()
	// Confirm checks a message against the records before any delivery of it is made
	// (orderpay.ConfirmEvent): a message it finds orderpay.Unconfirmed (a forged event on the
	// bus) is logged, counted by Forged, acknowledged and sent to nobody; any other error
	// has it delivered again. Optional: without it every message is taken as it comes.
	Confirm func(ctx context.Context, m orderpay.Message) error
	Forged  func(m orderpay.Message)
	// Clock defaults to the system clock; tests move it instead of sleeping.
	Clock    orderpay.Clock
	Observer Observer
	Logger   *slog.Logger
}

// Defaults.
const (
	ClientTimeoutDefault = 10 * time.Second
	LeaseDefault         = time.Minute
	BatchDefault         = 100
	WorkersDefault       = 64
	PerSubscriberDefault = 2
	// BackoffFirst is a subscriber's pause after its first failed attempt in a row; it
	// doubles with each failure after, up to the schedule's first wait.
	BackoffFirst = time.Second
	// maxSkip bounds the busy subscribers left out of one query by name.
	maxSkip = 500
)

// Service is the consumer, the worker and the operator's resend.
type Service struct {
	cfg   Config
	subs  map[string]Subscriber
	log   *slog.Logger
	since map[string]time.Time // by subscriber: events written before are not sent (Start)

	slots chan struct{} // Workers
	mu    sync.Mutex
	lanes map[string]*lane // by subscriber, while one is busy or backing off
	wg    sync.WaitGroup   // Dispatch's attempts
}

// lane is one subscriber's share of the worker.
type lane struct {
	inflight    int       // goroutines posting its deliveries
	failures    int       // failed attempts in a row
	pausedUntil time.Time // no attempt of it before
}

// New checks cfg and applies its defaults.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, orderpay.Errorf(orderpay.EINVALID, "webhook: a Store is required")
	}
	if len(cfg.Schedule) == 0 {
		cfg.Schedule = ScheduleDefault
	}
	if cfg.Client == nil {
		cfg.Client = NewClient(ClientTimeoutDefault, cfg.AllowNetworks)
	} else {
		c := *cfg.Client
		c.CheckRedirect = noRedirect
		cfg.Client = &c
	}
	cfg.Lease = cmp.Or(cfg.Lease, LeaseDefault)
	cfg.Batch = cmp.Or(cfg.Batch, BatchDefault)
	cfg.Workers = cmp.Or(cfg.Workers, WorkersDefault)
	cfg.PerSubscriber = min(cmp.Or(cfg.PerSubscriber, PerSubscriberDefault), cfg.Workers)
	if cfg.Created == nil {
		cfg.Created = func() {}
	}
	cfg.Clock = cmp.Or[orderpay.Clock](cfg.Clock, orderpay.SystemClock{})
	cfg.Observer = cmp.Or[Observer](cfg.Observer, NopObserver{})
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Service{cfg: cfg, subs: map[string]Subscriber{}, log: cfg.Logger.With("component", "webhook"), since: map[string]time.Time{},
		slots: make(chan struct{}, cfg.Workers), lanes: map[string]*lane{}}
	for _, sub := range cfg.Subscribers {
		u, err := url.Parse(sub.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, orderpay.Errorf(orderpay.EINVALID, "webhook: subscriber URL %q is not an http(s) URL", sub.Name())
		}
		if err := CheckURL(sub.URL, cfg.AllowNetworks); err != nil {
			return nil, orderpay.Errorf(orderpay.EINVALID, "webhook: subscriber %s: %s", sub.Name(), orderpay.ErrorMessage(err))
		}
		if len(sub.Secret) < 16 {
			return nil, orderpay.Errorf(orderpay.EINVALID, "webhook: the secret of %s must have at least 16 bytes", sub.Name())
		}
		if _, dup := s.subs[sub.Name()]; dup {
			return nil, orderpay.Errorf(orderpay.EINVALID, "webhook: subscriber %s is configured twice", sub.Name())
		}
		s.subs[sub.Name()] = sub
	}
	return s, nil
}

// Start records each subscriber's start: a subscriber seen for the first time receives the
// events written from now on, not the history the stream still holds (Replay sends that, on
// an operator's word); one seen before keeps its first start. Call it before Handle.
func (s *Service) Start(ctx context.Context) error {
	now := orderpay.Now(s.cfg.Clock)
	for _, sub := range s.cfg.Subscribers {
		since, err := s.cfg.Store.EnsureSubscriber(ctx, sub.Name(), now)
		if err != nil {
			return err
		}
		s.since[sub.Name()] = since
		if since.Equal(now) {
			s.log.Info("new webhook subscriber: it receives the events written from now on", "subscriber", sub.Name())
		}
	}
	return nil
}

// ReplayBatch is how many outbox messages Replay reads at a time.
const ReplayBatch = 500

// Replay sends subscriber the payment-center results written at or after since, oldest
// first, from the outbox, as deliveries like any other (a result it has a delivery of
// already is not sent again). It returns how many deliveries it made.
func (s *Service) Replay(ctx context.Context, subscriber string, since time.Time) (int, error) {
	sub, ok := s.subs[subscriber]
	if !ok {
		return 0, orderpay.Errorf(orderpay.ENOTFOUND, "no webhook subscriber %q is configured (the subscribers: %s)", subscriber,
			strings.Join(s.Subscribers(), ", "))
	}
	created := 0
	var after int64
	for {
		msgs, err := s.cfg.Store.OutboxMessages(ctx, Subjects, since, after, ReplayBatch)
		if err != nil {
			return created, err
		}
		for _, m := range msgs {
			after = m.Seq
			ok, err := s.deliver(ctx, sub, m.Message)
			if err != nil {
				return created, err
			}
			if ok {
				created++
			}
		}
		if len(msgs) < ReplayBatch {
			break
		}
	}
	s.log.Info("webhook history replayed", "subscriber", subscriber, "since", since, "deliveries", created)
	if created > 0 {
		s.cfg.Created()
	}
	return created, nil
}

// Subscribers names the configured subscribers.
func (s *Service) Subscribers() []string {
	out := make([]string, 0, len(s.cfg.Subscribers))
	for _, sub := range s.cfg.Subscribers {
		out = append(out, sub.Name())
	}
	return out
}

// envelope is the body every subscriber receives: the event's id (the same for every
// subscriber, and on every attempt), its subject, and its payload as published.
type envelope struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	CreatedAt time.Time       `json:"created_at"`
	Data      json.RawMessage `json:"data"`
}

// Handle is the bus handler: it stores one delivery per subscriber for each payment-center
// result and ignores other subjects. It returns nil once the rows are committed.
func (s *Service) Handle(ctx context.Context, m orderpay.Message) error {
	if s.cfg.Router != nil {
		subs, kind, data, owned, err := s.cfg.Router.Route(ctx, m)
		if err != nil {
			return err
		}
		if owned {
			if ok, err := s.confirmed(ctx, subs, m); !ok {
				return err
			}
			routed := m
			routed.Subject, routed.Payload = kind, data
			return s.deliverAll(ctx, subs, routed, false)
		}
	}
	if !isResult(m.Subject) || len(s.subs) == 0 {
		return nil
	}
	if ok, err := s.confirmed(ctx, s.cfg.Subscribers, m); !ok {
		return err
	}
	return s.deliverAll(ctx, s.cfg.Subscribers, m, true)
}

// confirmed reports whether m, as it came from the bus, may be delivered to subs: always
// when there are none to deliver to or nothing to confirm with (Config.Confirm); otherwise
// when the records confirm it. One they do not is a forgery: logged, counted, and
// acknowledged (false, nil). An error reading them has it delivered again.
func (s *Service) confirmed(ctx context.Context, subs []Subscriber, m orderpay.Message) (bool, error) {
	if len(subs) == 0 || s.cfg.Confirm == nil {
		return true, nil
	}
	err := s.cfg.Confirm(ctx, m)
	if orderpay.IsUnconfirmed(err) {
		s.log.Error("forged event on the bus: not confirmed by the records, acknowledged and sent to no subscriber",
			"subject", m.Subject, "msg_id", m.ID, "err", err)
		if s.cfg.Forged != nil {
			s.cfg.Forged(m)
		}
		return false, nil
	}
	return err == nil, err
}

// deliverAll stores m's delivery to each of subs; with fromConfigured, a subscriber is
// skipped for a message written before it was configured.
func (s *Service) deliverAll(ctx context.Context, subs []Subscriber, m orderpay.Message, fromConfigured bool) error {
	created := 0
	for _, sub := range subs {
		if since, ok := s.since[sub.Name()]; fromConfigured && ok && !m.CreatedAt.IsZero() && m.CreatedAt.Before(since) {
			continue // written before the subscriber was configured
		}
		ok, err := s.deliver(ctx, sub, m)
		if err != nil {
			return err
		}
		if ok {
			created++
		}
	}
	if created > 0 {
		s.cfg.Created()
	}
	return nil
}

// deliver makes sub's delivery of the result m, unless it has one; it reports whether it
// made it.
func (s *Service) deliver(ctx context.Context, sub Subscriber, m orderpay.Message) (bool, error) {
	var keys struct {
		OrderNo   string `json:"order_no"`
		PaymentNo string `json:"payment_no"`
	}
	if err := json.Unmarshal(m.Payload, &keys); err != nil || m.ID == "" {
		// Every outbox message has an id and a JSON body; one without cannot be keyed.
		s.log.Error("malformed payment-center message: no webhook", "subject", m.Subject, "msg_id", m.ID, "err", err)
		return false, nil
	}
	now := orderpay.Now(s.cfg.Clock)
	body, err := json.Marshal(envelope{ID: m.ID, Type: m.Subject, CreatedAt: cmp.Or(m.CreatedAt, now).UTC(), Data: m.Payload})
	if err != nil {
		return false, err
	}
	d := &Delivery{MsgID: m.ID, Subscriber: sub.Name(), Subject: m.Subject, Payload: body, OrderNo: keys.OrderNo,
		PaymentNo: keys.PaymentNo, Status: StatusPending, NextAt: now, CreatedAt: now, UpdatedAt: now}
	ok, err := s.cfg.Store.CreateDelivery(ctx, d)
	if ok {
		s.log.Info("webhook delivery created", "delivery_id", d.ID, "subscriber", d.Subscriber, "subject", m.Subject, "msg_id", m.ID,
			"order_no", keys.OrderNo, "payment_no", keys.PaymentNo)
	}
	return ok, err
}

func isResult(subject string) bool {
	for _, s := range Subjects {
		if s == subject {
			return true
		}
	}
	return false
}

// RunResult is what one run of the worker did.
type RunResult struct {
	Due       int // due deliveries found
	Delivered int // answered 2xx
	Retrying  int // failed, with a retry scheduled
	Dead      int // failed for the last time
	Skipped   int // claimed elsewhere, or for a subscriber not configured here
}

// unconfiguredLease is how long a delivery for a subscriber this instance does not know is
// set aside (another instance may know it, or the operator may configure it again).
const unconfiguredLease = time.Hour

// RunOnce posts the due deliveries and returns once every attempt it started has ended.
// Each subscriber's are posted in its own lane, at most PerSubscriber at once, so that a
// slow receiver does not hold back another's; a subscriber backing off after a failure, or
// with its lane full (Dispatch's attempts), is left for a later run. With Workers 1 the
// attempts are made one at a time in the caller's goroutine, in due order.
func (s *Service) RunOnce(ctx context.Context) (RunResult, error) {
	return s.run(ctx, true)
}

// Dispatch starts the attempts of the due deliveries, each subscriber's in its own lane as
// RunOnce does, and returns without waiting for them: a run while a slow receiver is still
// being posted to sends every other subscriber's deliveries at once. The result counts the
// due deliveries and those set aside (Skipped); the outcomes are logged and counted by
// the Observer. The attempts use ctx; Wait waits for them.
func (s *Service) Dispatch(ctx context.Context) (RunResult, error) {
	return s.run(ctx, false)
}

// Wait waits for the attempts Dispatch started.
func (s *Service) Wait() { s.wg.Wait() }

func (s *Service) run(ctx context.Context, wait bool) (RunResult, error) {
	var res RunResult
	now := orderpay.Now(s.cfg.Clock)
	due, err := s.cfg.Store.DueDeliveries(ctx, now, s.cfg.Batch, s.busy(now))
	if err != nil {
		return res, err
	}
	res.Due = len(due)
	var (
		mu       sync.Mutex
		firstErr error
	)
	tally := func(outcome string, err error) {
		mu.Lock()
		defer mu.Unlock()
		switch outcome {
		case "delivered":
			res.Delivered++
		case "retrying":
			res.Retrying++
		case "dead":
			res.Dead++
		default:
			res.Skipped++
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	if s.cfg.Workers <= 1 && wait {
		for _, d := range due {
			if ctx.Err() != nil {
				break
			}
			if !s.take(d.Subscriber, now) {
				tally("skipped", nil)
				continue
			}
			outcome, err := s.attempt(ctx, d)
			s.release(d.Subscriber)
			tally(outcome, err)
		}
		return res, cmp.Or(firstErr, ctx.Err())
	}
	// Each subscriber's deliveries, in due order, for its lane.
	var order []string
	queues := map[string][]Delivery{}
	for _, d := range due {
		if _, ok := queues[d.Subscriber]; !ok {
			order = append(order, d.Subscriber)
		}
		queues[d.Subscriber] = append(queues[d.Subscriber], d)
	}
	var wg sync.WaitGroup
	for _, name := range order {
		q := queues[name]
		n := s.takeUpTo(name, len(q), now)
		if n == 0 {
			mu.Lock()
			res.Skipped += len(q)
			mu.Unlock()
			continue
		}
		work := make(chan Delivery, len(q))
		for _, d := range q {
			work <- d
		}
		close(work)
		for range n {
			wg.Add(1)
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer wg.Done()
				defer s.release(name)
				for d := range work {
					if ctx.Err() != nil || s.paused(name) {
						tally("skipped", nil) // left due, for a later run
						continue
					}
					s.slots <- struct{}{}
					outcome, err := s.attempt(ctx, d)
					<-s.slots
					if err != nil && !wait && ctx.Err() == nil {
						s.log.Error("webhook attempt failed to be made", "delivery_id", d.ID, "subscriber", name, "err", err)
					}
					tally(outcome, err)
				}
			}()
		}
	}
	mu.Lock()
	started := res // what is known now; Dispatch's attempts go on tallying into res
	mu.Unlock()
	if !wait {
		return started, nil
	}
	wg.Wait()
	return res, cmp.Or(firstErr, ctx.Err())
}

// busy names the subscribers whose lane is full or paused at now: their due rows are not
// read.
func (s *Service) busy(now time.Time) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for name, l := range s.lanes {
		if l.inflight >= s.cfg.PerSubscriber || now.Before(l.pausedUntil) {
			out = append(out, name)
			if len(out) == maxSkip {
				break
			}
		}
	}
	return out
}

// take reserves one attempt in name's lane, unless it is full or paused at now.
func (s *Service) take(name string, now time.Time) bool { return s.takeUpTo(name, 1, now) == 1 }

// takeUpTo reserves up to want goroutines in name's lane, as many as it has room for (none
// while it is paused at now), and returns how many.
func (s *Service) takeUpTo(name string, want int, now time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.lanes[name]
	if l == nil {
		l = &lane{}
		s.lanes[name] = l
	}
	if now.Before(l.pausedUntil) {
		return 0
	}
	n := min(want, s.cfg.PerSubscriber-l.inflight)
	if n < 0 {
		n = 0
	}
	l.inflight += n
	return n
}

// release gives back one goroutine of name's lane.
func (s *Service) release(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.lanes[name]
	if l == nil {
		return
	}
	l.inflight--
	if l.inflight <= 0 && l.failures == 0 {
		delete(s.lanes, name)
	}
}

// paused reports whether name's lane is backing off now.
func (s *Service) paused(name string) bool {
	now := orderpay.Now(s.cfg.Clock)
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.lanes[name]
	return l != nil && now.Before(l.pausedUntil)
}

// outcome moves name's backoff after an attempt made at at: a 2xx ends it, a failure
// pauses the lane for BackoffFirst, doubled with each failure in a row, up to the
// schedule's first wait (so that a single delivery's own schedule is never held back by
// its subscriber's pause).
func (s *Service) outcome(name string, ok bool, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.lanes[name]
	if l == nil {
		if ok {
			return
		}
		l = &lane{}
		s.lanes[name] = l
	}
	if ok {
		l.failures, l.pausedUntil = 0, time.Time{}
		return
	}
	l.failures++
	pause := s.cfg.Schedule[0]
	if l.failures < 30 {
		pause = min(pause, BackoffFirst<<(l.failures-1))
	}
	l.pausedUntil = at.Add(pause)
}

// attempt makes one scheduled attempt of d.
func (s *Service) attempt(ctx context.Context, d Delivery) (string, error) {
	log := s.log.With("delivery_id", d.ID, "order_no", d.OrderNo, "payment_no", d.PaymentNo, "subscriber", d.Subscriber)
	now := orderpay.Now(s.cfg.Clock)
	sub, ok, err := s.subscriber(ctx, d.Subscriber)
	if err != nil {
		return "skipped", err
	}
	lease := s.cfg.Lease
	if !ok {
		lease = unconfiguredLease
	}
	claimed, err := s.cfg.Store.ClaimDelivery(ctx, d.ID, d.Attempts, now.Add(lease), now)
	if err != nil || !claimed {
		return "skipped", err
	}
	if !ok {
		log.Warn("webhook delivery for a subscriber not configured here; set aside", "for", unconfiguredLease)
		return "skipped", nil
	}
	a := s.post(ctx, sub, &d, KindSchedule)
	s.outcome(d.Subscriber, ok2xx(a.HTTPStatus), a.At)
	rec := AttemptRecord{Attempt: a, Before: d.Attempts}
	n := d.Attempts + 1
	outcome := "delivered"
	switch {
	case ok2xx(a.HTTPStatus):
		rec.Status = StatusSucceeded
	case n > len(s.cfg.Schedule):
		rec.Status, outcome = StatusFailed, "dead"
	default:
		rec.Status, rec.NextAt, outcome = StatusPending, a.At.Add(s.cfg.Schedule[n-1]), "retrying"
	}
	changed, err := s.cfg.Store.RecordAttempt(context.WithoutCancel(ctx), rec)
	if err != nil {
		return "skipped", err
	}
	if !changed {
		// A resend delivered it meanwhile, or the lease ran out and another worker took
		// the step: that one's record stands.
		log.Info("webhook attempt recorded; the delivery had moved on", "attempt", n, "http_status", a.HTTPStatus)
		return "skipped", nil
	}
	switch outcome {
	case "delivered":
		log.Info("webhook delivered", "attempt", n, "http_status", a.HTTPStatus)
	case "dead":
		s.cfg.Observer.WebhookDead(d.Subscriber)
		log.Error("webhook delivery failed for the last time: needs an operator (resend)", "attempt", n,
			"http_status", a.HTTPStatus, "err", a.Error)
	default:
		log.Warn("webhook attempt failed; will retry", "attempt", n, "http_status", a.HTTPStatus, "err", a.Error, "next_at", rec.NextAt)
	}
	return outcome, nil
}

// Resend posts a delivery once more, now, whatever became of it: delivered, still being
// retried, or dead. A 2xx marks it SUCCEEDED (ending its schedule); a failure leaves its
// status and schedule as they were. It returns the delivery after the attempt, with its
// attempts.
func (s *Service) Resend(ctx context.Context, id int64) (*Delivery, []Attempt, error) {
	d, _, err := s.cfg.Store.Delivery(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	sub, ok, err := s.subscriber(ctx, d.Subscriber)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		return nil, nil, orderpay.Errorf(orderpay.ECONFLICT, "delivery %d is for %s, which is not configured here", id, d.Subscriber)
	}
	a := s.post(ctx, sub, d, KindResend)
	rec := AttemptRecord{Attempt: a, Status: d.Status}
	if ok2xx(a.HTTPStatus) {
		rec.Status = StatusSucceeded
		s.outcome(d.Subscriber, true, a.At) // it answers again: its backoff ends
	}
	if _, err := s.cfg.Store.RecordAttempt(context.WithoutCancel(ctx), rec); err != nil {
		return nil, nil, err
	}
	s.log.Info("webhook resent by an operator", "delivery_id", id, "order_no", d.OrderNo, "payment_no", d.PaymentNo,
		"subscriber", d.Subscriber, "previous_status", string(d.Status), "http_status", a.HTTPStatus, "err", a.Error)
	return s.cfg.Store.Delivery(ctx, id)
}

// Delivery returns one delivery and its attempts.
func (s *Service) Delivery(ctx context.Context, id int64) (*Delivery, []Attempt, error) {
	return s.cfg.Store.Delivery(ctx, id)
}

// Deliveries lists deliveries, newest first.
func (s *Service) Deliveries(ctx context.Context, f Filter, limit int) ([]Delivery, error) {
	switch f.Status {
	case "", StatusPending, StatusSucceeded, StatusFailed:
	default:
		return nil, orderpay.Errorf(orderpay.EINVALID, "status must be PENDING, SUCCEEDED or FAILED, not %q", f.Status)
	}
	return s.cfg.Store.Deliveries(ctx, f, limit)
}

// maxExcerpt bounds what is kept of a receiver's answer, or of why an attempt failed: a
// short excerpt, printable characters only. An answer is the receiver's text, and may be an
// internal service's; nothing more of it is stored, shown or logged.
const maxExcerpt = 200

// post makes one signed POST of d to sub and says what came back. It never fails: a
// failure is the attempt's outcome. A redirect is not followed: it is a failed attempt.
func (s *Service) post(ctx context.Context, sub Subscriber, d *Delivery, kind string) Attempt {
	at := orderpay.Now(s.cfg.Clock)
	a := Attempt{DeliveryID: d.ID, Kind: kind, At: at}
	result := "failed"
	defer func() { s.cfg.Observer.WebhookAttempt(d.Subscriber, kind, result) }()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, sub.URL, bytes.NewReader(d.Payload))
	if err != nil {
		a.Error = "the subscriber's URL cannot be requested" // the error would quote it
		return a
	}
	delivery := strconv.FormatInt(d.ID, 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "orderpay-webhook/2")
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(at.Unix(), 10))
	req.Header.Set(HeaderSignature, Sign(sub.Secret, at, delivery, d.Payload))
	req.Header.Set(HeaderDelivery, delivery)
	req.Header.Set(HeaderEvent, d.Subject)
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		// The URL in a *url.Error may carry credentials; keep only what went wrong.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		a.Error = Excerpt(err.Error())
		return a
	}
	defer resp.Body.Close()
	a.HTTPStatus = resp.StatusCode
	switch {
	case ok2xx(resp.StatusCode):
		result = "delivered"
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return a
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		a.Error = fmt.Sprintf("HTTP %d: a redirect, not followed", resp.StatusCode)
		return a
	}
	text, _ := io.ReadAll(io.LimitReader(resp.Body, maxExcerpt))
	a.Error = Excerpt(fmt.Sprintf("HTTP %d: %s", resp.StatusCode, text))
	return a
}

// Excerpt is at most 200 bytes of s, printable characters only: any other (a control
// character, a line break, invalid UTF-8) becomes a space, and runs of spaces one.
func Excerpt(s string) string {
	var b strings.Builder
	space := false
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if r == utf8.RuneError || !unicode.IsPrint(r) || unicode.IsSpace(r) {
			space = b.Len() > 0
			continue
		}
		add := utf8.RuneLen(r)
		if space {
			add++
		}
		if b.Len()+add > maxExcerpt {
			break
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// subscriber finds a configured subscriber, or one of the router's.
func (s *Service) subscriber(ctx context.Context, name string) (Subscriber, bool, error) {
	if sub, ok := s.subs[name]; ok {
		return sub, true, nil
	}
	if s.cfg.Router == nil {
		return Subscriber{}, false, nil
	}
	return s.cfg.Router.Subscriber(ctx, name)
}

func ok2xx(status int) bool { return status >= 200 && status < 300 }
