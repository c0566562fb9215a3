package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"orderpay"
)

// Server-sent events of an order's status (docs/design.md §9), for the pay page: it flips to paid
// without a reload, and sets its countdown by the server's clock on every message.
//
// Streams are bounded: a buyer may hold StreamsPerBuyer at once and the server StreamsMax,
// beyond which the answer is 429 or 503 with Retry-After and the page polls instead; each
// ends after StreamMaxAge. However many streams watch one order, they share its reads
// (watchOrder), and the payment center shares the channel queries of one payment (Poll).

// Defaults of the stream limits.
const (
	StreamsPerBuyerDefault = 4
	StreamsMaxDefault      = 1000
	// StreamMaxAgeDefault ends a stream after a while; EventSource reconnects by itself, and
	// a forgotten tab does not hold a connection for ever.
	StreamMaxAgeDefault = 10 * time.Minute
)

const (
	// eventsEvery is how often a stream reads an unpaid order in its first minute, when a
	// buyer who has just paid is watching. The read is the buyer's Watch, which asks the
	// payment center to query the channel (at most once per interval per payment, shared).
	eventsEvery     = 500 * time.Millisecond
	eventsCalmAfter = time.Minute
	eventsCalmEvery = 1500 * time.Millisecond
	// eventsSlowAfter and eventsSlowEvery: a buyer pays within minutes of opening the
	// page, or has left the tab open; after a while the stream asks less often, so that
	// forgotten tabs do not keep querying the channel.
	eventsSlowAfter = 3 * time.Minute
	eventsSlowEvery = 5 * time.Second
	// eventsResync is how often an unchanged order is sent anyway, for the countdown.
	eventsResync = 15 * time.Second
	// sharedReadFor is how long one stream's read of an order serves the others watching it.
	sharedReadFor = 400 * time.Millisecond
)

// StreamLimits bound the order event streams.
type StreamLimits struct {
	PerBuyer int           // streams one buyer holds at once. Defaults to StreamsPerBuyerDefault.
	Max      int           // streams the server holds at once. Defaults to StreamsMaxDefault.
	MaxAge   time.Duration // one stream's life. Defaults to StreamMaxAgeDefault.
}

func (l StreamLimits) withDefaults() StreamLimits {
	if l.PerBuyer <= 0 {
		l.PerBuyer = StreamsPerBuyerDefault
	}
	if l.Max <= 0 {
		l.Max = StreamsMaxDefault
	}
	if l.MaxAge <= 0 {
		l.MaxAge = StreamMaxAgeDefault
	}
	return l
}

// streams holds the open event streams: how many each buyer and the server hold, and lets
// the server end them all when it shuts down (http.Server.Shutdown waits for handlers, and
// a stream would otherwise keep it waiting).
type streams struct {
	once sync.Once // makes done
	stop sync.Once // closes it
	done chan struct{}

	mu      sync.Mutex
	total   int
	byBuyer map[string]int

	reads      singleflight.Group
	readsMu    sync.Mutex
	lastReads  map[string]sharedRead
	readsSwept time.Time
}

type sharedRead struct {
	o  *orderpay.Order
	at time.Time
}

func (st *streams) stopped() chan struct{} {
	st.once.Do(func() { st.done = make(chan struct{}) })
	return st.done
}

// open takes a stream slot for key, or says which cap refused it.
func (st *streams) open(key string, l StreamLimits) (ok, perBuyer bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.byBuyer == nil {
		st.byBuyer = map[string]int{}
	}
	switch {
	case st.byBuyer[key] >= l.PerBuyer:
		return false, true
	case st.total >= l.Max:
		return false, false
	}
	st.byBuyer[key]++
	st.total++
	return true, false
}

func (st *streams) close(key string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.total--
	if st.byBuyer[key]--; st.byBuyer[key] <= 0 {
		delete(st.byBuyer, key)
	}
}

// StopStreams ends every open event stream, now and from now on; call it when shutting down
// (http.Server.RegisterOnShutdown).
func (s *Server) StopStreams() {
	s.streams.stop.Do(func() { close(s.streams.stopped()) })
}

// watchOrder is a stream's read of an order it watches: the buyer's Watch, shared by every
// stream of the order that reads within sharedReadFor, and by those reading at the same
// moment; so the reads and queries an order costs do not grow with its streams.
func (s *Server) watchOrder(ctx context.Context, no string) (*orderpay.Order, error) {
	st := &s.streams
	now := time.Now()
	st.readsMu.Lock()
	if r, ok := st.lastReads[no]; ok && now.Sub(r.at) < sharedReadFor {
		st.readsMu.Unlock()
		return r.o, nil
	}
	st.readsMu.Unlock()
	v, err, _ := st.reads.Do(no, func() (any, error) {
		o, err := s.Orders.Watch(context.WithoutCancel(ctx), no)
		if err != nil {
			return nil, err
		}
		at := time.Now()
		st.readsMu.Lock()
		defer st.readsMu.Unlock()
		if st.lastReads == nil {
			st.lastReads = map[string]sharedRead{}
		}
		if at.Sub(st.readsSwept) > time.Minute { // drop the reads of orders nobody watches
			for k, r := range st.lastReads {
				if at.Sub(r.at) >= sharedReadFor {
					delete(st.lastReads, k)
				}
			}
			st.readsSwept = at
		}
		st.lastReads[no] = sharedRead{o: o, at: at}
		return o, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*orderpay.Order), nil
}

// orderEvents is GET /v1/orders/{order_no}/events: an "order" event with the order's JSON
// now and whenever its status changes, and every eventsResync anyway. The stream ends once
// the order is no longer waiting for payment (after sending that status), when the client
// goes, after the streams' MaxAge, or when the server stops. It is exempt from the server's
// read and write timeouts, which would cut it: its MaxAge bounds it instead.
func (s *Server) orderEvents(w http.ResponseWriter, r *http.Request, c caller) {
	ctx := r.Context()
	no := r.PathValue("order_no")
	o, err := s.ownOrder(ctx, c, no)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	limits := s.StreamLimits.withDefaults()
	send, done, ok := s.openStream(w, r, c, limits, "GET /v1/orders/"+no)
	if !ok {
		return
	}
	defer done()
	if o.Status == orderpay.OrderPendingPayment {
		// The first read is a watch too: the buyer is looking from now on, and the payment
		// center's grace before it queries for a watcher counts from here.
		if cur, err := s.watchOrder(ctx, no); err == nil {
			o = cur
		}
	}
	s.follow(ctx, limits, send, "order", func(ctx context.Context, first bool) (any, any, bool, error) {
		if !first {
			cur, err := s.watchOrder(ctx, no)
			if err != nil {
				return nil, nil, false, fmt.Errorf("order event stream: reading order %s: %w", no, err)
			}
			o = cur
		}
		return o.Status, s.toOrderJSON(o), o.Status != orderpay.OrderPendingPayment, nil
	})
}

// follow runs an event stream: read gives what the stream follows (first: as it was read
// before the stream opened), as a key whose change is worth an event, the event's body,
// and whether it ended. The body is sent at once, then whenever the key changes (and at
// least every eventsResync), reading every eventsEvery (eventsCalmEvery after a minute,
// eventsSlowEvery after three), until it ends, the stream's age passes MaxAge, the client
// goes or the server stops. A failed read is logged and tried again at the next tick.
func (s *Server) follow(ctx context.Context, limits StreamLimits, send func(event string, v any) bool, event string,
	read func(ctx context.Context, first bool) (key, body any, ended bool, err error)) {
	last, body, ended, err := read(ctx, true)
	if err != nil || !send(event, body) {
		return
	}
	start := time.Now() // the stream's own age, on the monotonic clock
	lastSent := s.Clock.Now()
	next := time.NewTimer(eventsEvery)
	defer next.Stop()
	for !ended {
		select {
		case <-ctx.Done():
			return
		case <-s.streams.stopped():
			return
		case <-next.C:
		}
		age := time.Since(start)
		switch {
		case age >= limits.MaxAge:
			return
		case age >= eventsSlowAfter:
			next.Reset(eventsSlowEvery)
		case age >= eventsCalmAfter:
			next.Reset(eventsCalmEvery)
		default:
			next.Reset(eventsEvery)
		}
		var key any
		key, body, ended, err = read(ctx, false)
		if err != nil {
			if ctx.Err() == nil {
				s.Logger.Warn("event stream: a read failed", "err", err)
			}
			continue
		}
		if now := s.Clock.Now(); key != last || now.Sub(lastSent) >= eventsResync {
			if !send(event, body) {
				return
			}
			last, lastSent = key, now
		}
	}
}

// openStream opens a buyer's event stream, within the streams' limits (too many are
// refused, naming the poll to use instead, pollRoute). send writes one event and reports
// whether the client still reads; done must be called once the stream ends.
func (s *Server) openStream(w http.ResponseWriter, r *http.Request, c caller, limits StreamLimits, pollRoute string) (send func(event string, v any) bool, done func(), ok bool) {
	key := s.limitKey(r, c)
	if ok, perBuyer := s.streams.open(key, limits); !ok {
		if perBuyer {
			refuse(w, eventsSlowEvery, fmt.Sprintf("this buyer already watches %d streams; poll instead", limits.PerBuyer))
			return nil, nil, false
		}
		w.Header().Set("Retry-After", "5")
		s.writeError(w, r, orderpay.Errorf(orderpay.EUNAVAILABLE, "too many event streams are open; poll %s instead", pollRoute))
		return nil, nil, false
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // a proxy in front must not hold the events back
	w.WriteHeader(http.StatusOK)
	done = func() { s.streams.close(key) }
	// A lost connection is retried by EventSource after this many milliseconds.
	if _, err := fmt.Fprintf(w, "retry: %d\n\n", eventsCalmEvery.Milliseconds()); err != nil {
		done()
		return nil, nil, false
	}
	send = func(event string, v any) bool {
		b, _ := json.Marshal(v)
		// Each write may take as long as a write to any client; a stalled reader is cut.
		_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	return send, done, true
}

// streamWriteTimeout bounds one event's write to a stream.
const streamWriteTimeout = 10 * time.Second
