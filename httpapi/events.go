package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"orderpay"
)

// Server-sent events of an order's status (DESIGN §8), for the pay page: it flips to paid
// without a reload, and sets its countdown by the server's clock on every message.

const (
	// eventsEvery is how often a stream reads an unpaid order. The read is the buyer's
	// Watch, which asks the payment center to query the channel (rate-limited there), so a
	// page open on the order finds a payment whose notification was lost.
	eventsEvery = 1500 * time.Millisecond
	// eventsSlowAfter and eventsSlowEvery: a buyer pays within minutes of opening the
	// page, or has left the tab open; after a while the stream asks less often, so that
	// forgotten tabs do not keep querying the channel every second.
	eventsSlowAfter = 3 * time.Minute
	eventsSlowEvery = 5 * time.Second
	// eventsResync is how often an unchanged order is sent anyway, for the countdown.
	eventsResync = 15 * time.Second
	// eventsMaxAge ends a stream after a while; EventSource reconnects by itself, and a
	// forgotten tab does not hold a connection forever.
	eventsMaxAge = 10 * time.Minute
)

// streams lets the server end every open stream when it shuts down: http.Server.Shutdown
// waits for handlers, and a stream would otherwise keep it waiting.
type streams struct {
	once sync.Once // makes done
	stop sync.Once // closes it
	done chan struct{}
}

func (st *streams) stopped() chan struct{} {
	st.once.Do(func() { st.done = make(chan struct{}) })
	return st.done
}

// StopStreams ends every open event stream, now and from now on; call it when shutting down
// (http.Server.RegisterOnShutdown).
func (s *Server) StopStreams() {
	s.streams.stop.Do(func() { close(s.streams.stopped()) })
}

// orderEvents is GET /v1/orders/{order_no}/events: an "order" event with the order's JSON
// now and whenever its status changes, and every eventsResync anyway. The stream ends once
// the order is no longer waiting for payment (after sending that status), when the client
// goes, after eventsMaxAge, or when the server stops.
func (s *Server) orderEvents(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	no := r.PathValue("order_no")
	o, err := s.Orders.Order(ctx, no)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // a proxy in front must not hold the events back
	w.WriteHeader(http.StatusOK)
	// A lost connection is retried by EventSource after this many milliseconds.
	if _, err := fmt.Fprintf(w, "retry: %d\n\n", eventsEvery.Milliseconds()); err != nil {
		return
	}
	send := func(o *orderpay.Order) bool {
		b, _ := json.Marshal(s.toOrderJSON(o))
		if _, err := fmt.Fprintf(w, "event: order\ndata: %s\n\n", b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send(o) {
		return
	}
	start := time.Now() // the stream's own age, on the monotonic clock
	last, lastSent := o.Status, s.Clock.Now()
	next := time.NewTimer(eventsEvery)
	defer next.Stop()
	for o.Status == orderpay.OrderPendingPayment {
		select {
		case <-ctx.Done():
			return
		case <-s.streams.stopped():
			return
		case <-next.C:
		}
		age := time.Since(start)
		if age >= eventsMaxAge {
			return
		}
		if age >= eventsSlowAfter {
			next.Reset(eventsSlowEvery)
		} else {
			next.Reset(eventsEvery)
		}
		cur, err := s.Orders.Watch(ctx, no)
		if err != nil {
			if ctx.Err() == nil {
				s.Logger.Warn("order event stream: reading the order failed", "order_no", no, "err", err)
			}
			continue
		}
		o = cur
		if now := s.Clock.Now(); o.Status != last || now.Sub(lastSent) >= eventsResync {
			if !send(o) {
				return
			}
			last, lastSent = o.Status, now
		}
	}
}
