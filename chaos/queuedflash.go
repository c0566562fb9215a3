package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The queued flash sale (`orderpay bench flash --queued`): one SKU marked queued, and a
// burst of buyers each ordering one unit of it. Each buyer is answered at once with a
// ticket (202) and follows it (GET /v1/tickets/{id}, read again after a pause that grows
// with its position, as a waiting page would) until it ends: an order, sold out, expired.
// Meanwhile two probes measure the rest of the shop, as its other customers would use it:
// one reads the catalogue (GET /v1/skus) every 20 ms, one creates and pays an order of an
// unrelated SKU, pausing 100 ms between orders. The same burst against the same SKU
// unqueued (each buyer answered 201 or 409 at once, as `bench flash` does) runs beside it,
// so that both sets of figures come from one command on one machine.

// Defaults of QueuedFlashConfig.
const (
	DefaultQueuedFlashBuyers = 50_000
	// DefaultQueuedFlashConcurrency is how many of the buyers' requests are in flight at
	// once: the burst is every buyer at once, but one client machine cannot hold 50,000
	// connections to a server on the same two cores.
	DefaultQueuedFlashConcurrency = 256
	DefaultQueueWait              = 60 * time.Second
)

// QueuedFlashConfig is one queued flash-sale run. Zero fields take the defaults.
type QueuedFlashConfig struct {
	Buyers  int // buyers in the burst, one unit each; 50,000
	Units   int // the SKU's stock; 1,000
	Buckets int // rows the SKU's stock is split over; 16
	// QueuePace is the SKU's orders per second per instance; 0 is as fast as the store
	// commits.
	QueuePace int64
	// QueueWait is how long a ticket may wait (whole seconds); 60 s.
	QueueWait time.Duration
	// Concurrency bounds the buyers' orders in flight at once, on keep-alive connections;
	// 256. Their tickets' reads have a quarter as many of their own.
	Concurrency int
	// Compare runs the same burst against the SKU unqueued too, in a server of its own.
	Compare bool
	DB      string // postgres:// DSN; "" is SQLite in a temp dir
	Binary  string // the orderpay binary to run as the server; "" is this one
	Logger  *slog.Logger
}

// QueuedFlashReport is what a run measured: the queued sale and, with Compare, the same
// burst unqueued.
type QueuedFlashReport struct {
	Store       string        `json:"store"`
	Buyers      int           `json:"buyers"`
	Units       int           `json:"units"`
	Buckets     int           `json:"buckets"`
	QueuePace   int64         `json:"queue_pace"`
	QueueWaitS  int64         `json:"queue_wait_seconds"`
	Concurrency int           `json:"concurrency"`
	Queued      *FlashSaleRun `json:"queued"`
	Unqueued    *FlashSaleRun `json:"unqueued,omitempty"`
	Failures    []string      `json:"failures"`
}

// FlashSaleRun is one burst's figures.
type FlashSaleRun struct {
	Mode string `json:"mode"` // "queued" or "unqueued"
	// Answers: every buyer's final answer. Ordered: an order (201, or a ticket ORDERED);
	// SoldOut: sold out (409 EOUTOFSTOCK, or a ticket SOLD_OUT); Expired and Refused: the
	// ticket's other ends. SoldOutAtOrder counts, of SoldOut, the buyers told so by the
	// order request itself (409) rather than by a ticket.
	Ordered        int            `json:"ordered"`
	SoldOut        int            `json:"sold_out"`
	SoldOutAtOrder int            `json:"sold_out_at_order"`
	Expired        int            `json:"expired"`
	Refused        int            `json:"refused"`
	Unanswered     int            `json:"unanswered"`
	Errors         map[string]int `json:"errors"`       // buyers whose order got another answer, by error key
	Tickets        int            `json:"tickets"`      // tickets the buyers were given
	Replayed       int            `json:"replayed"`     // of them, answered 200 (a ticket the buyer held)
	TicketReads    int            `json:"ticket_reads"` // GET /v1/tickets/{id} the buyers made
	ReadErrors     map[string]int `json:"ticket_read_errors,omitempty"`

	// IntakeSeconds is from the burst's start to the last order request answered;
	// LastAnswerSeconds to the last buyer told its final answer (a ticket's end seen by
	// its buyer's read); LastEndSeconds to the last ticket's end in the database (the
	// server's clock), which the reads see up to a pause later.
	IntakeSeconds     float64 `json:"intake_seconds"`
	LastAnswerSeconds float64 `json:"last_answer_seconds"`
	LastEndSeconds    float64 `json:"last_end_seconds"`
	// RequestsPerSecond is the order requests answered per second of the intake.
	RequestsPerSecond float64 `json:"requests_per_second"`
	// DrainOrdersPerSecond is the SKU's orders per second while they were made: their
	// count over the time from the first order's creation to the last's (the database's
	// clock), the burst's start to the last for a single order.
	DrainOrdersPerSecond float64 `json:"drain_orders_per_second"`
	DrainSeconds         float64 `json:"drain_seconds"`
	// AnswerMS is each buyer's time from its order request to its final answer.
	AnswerMS Latency `json:"answer_ms"`

	// The probes, during the burst (from its start to the last answer).
	SKUsMS      Latency        `json:"skus_ms"` // GET /v1/skus
	SKUsErrors  map[string]int `json:"skus_errors"`
	PayMS       Latency        `json:"pay_ms"` // create + pay + the wallet + PAID seen, an unrelated SKU
	PayErrors   map[string]int `json:"pay_errors"`
	ProbeWindow float64        `json:"probe_window_seconds"`

	// From the database afterwards.
	Available  int64          `json:"available"`
	Locked     int64          `json:"locked"`
	Sold       int64          `json:"sold"`
	Total      int64          `json:"total"`
	Orders     int            `json:"orders_in_db"`     // orders with a line of the SKU
	OrderUnits int64          `json:"order_units"`      // the units of those lines
	Oversold   int64          `json:"oversold"`         // units ordered beyond the SKU's
	TicketsDB  map[string]int `json:"tickets_in_db"`    // tickets by state
	Unended    int            `json:"tickets_waiting"`  // tickets still WAITING
	SharedNo   int            `json:"tickets_sharing"`  // tickets ORDERED whose order another ticket names too
	Orphans    int            `json:"orders_no_ticket"` // orders of the SKU no ticket names
	Seconds    float64        `json:"seconds"`          // the whole run, set-up included
	Failures   []string       `json:"failures"`         // why it does not pass, if it does not
}

// check fills Failures: 0 oversold, the stock row and the orders agree, every buyer
// answered, nothing but the expected answers; queued, every ticket ended and each order
// a ticket's, once.
func (r *FlashSaleRun) check(units int) {
	var f []string
	if r.Oversold != 0 {
		f = append(f, fmt.Sprintf("%d units oversold", r.Oversold))
	}
	if r.Available+r.Locked+r.Sold != r.Total || r.Total != int64(units) {
		f = append(f, fmt.Sprintf("stock available %d + locked %d + sold %d, total %d, not %d units", r.Available, r.Locked, r.Sold, r.Total, units))
	}
	if r.Locked+r.Sold != r.OrderUnits {
		f = append(f, fmt.Sprintf("locked %d + sold %d but the orders hold %d units", r.Locked, r.Sold, r.OrderUnits))
	}
	if r.Ordered != r.Orders {
		f = append(f, fmt.Sprintf("%d buyers told they have an order, %d orders in the database", r.Ordered, r.Orders))
	}
	if r.Unanswered != 0 {
		f = append(f, fmt.Sprintf("%d buyers never answered", r.Unanswered))
	}
	if n := sumMap(r.Errors); n != 0 {
		f = append(f, fmt.Sprintf("%d buyers answered with an error %v", n, r.Errors))
	}
	if r.Mode == "queued" {
		if r.Unended != 0 {
			f = append(f, fmt.Sprintf("%d tickets still WAITING", r.Unended))
		}
		if r.SharedNo != 0 || r.Orphans != 0 {
			f = append(f, fmt.Sprintf("%d tickets share an order, %d orders of the SKU are no ticket's", r.SharedNo, r.Orphans))
		}
		if r.TicketsDB[TicketOrdered] != r.Orders {
			f = append(f, fmt.Sprintf("%d tickets ORDERED, %d orders", r.TicketsDB[TicketOrdered], r.Orders))
		}
	}
	r.Failures = f
}

// Pass reports whether both runs passed.
func (r *QueuedFlashReport) Pass() bool { return len(r.Failures) == 0 }

// QueuedFlashBench runs the queued flash sale and, with cfg.Compare, the unqueued one.
func QueuedFlashBench(ctx context.Context, cfg QueuedFlashConfig) (*QueuedFlashReport, error) {
	cfg.Buyers = cmp.Or(cfg.Buyers, DefaultQueuedFlashBuyers)
	cfg.Units = cmp.Or(cfg.Units, DefaultFlashUnits)
	cfg.Buckets = cmp.Or(cfg.Buckets, DefaultFlashBuckets)
	cfg.QueueWait = cmp.Or(cfg.QueueWait, DefaultQueueWait)
	cfg.Concurrency = cmp.Or(cfg.Concurrency, DefaultQueuedFlashConcurrency)
	switch {
	case cfg.Buyers < 1 || cfg.Units < 1 || cfg.Buckets < 1 || cfg.Buckets > 256:
		return nil, errors.New("flash bench: buyers and units must be positive, buckets 1-256")
	case cfg.QueuePace < 0 || cfg.QueueWait < time.Second || cfg.Concurrency < 1:
		return nil, errors.New("flash bench: the queue pace must not be negative, the wait at least a second, the concurrency positive")
	}
	rep := &QueuedFlashReport{Buyers: cfg.Buyers, Units: cfg.Units, Buckets: cfg.Buckets, QueuePace: cfg.QueuePace,
		QueueWaitS: int64(cfg.QueueWait / time.Second), Concurrency: cfg.Concurrency, Failures: []string{}}
	var err error
	if rep.Queued, rep.Store, err = flashSale(ctx, cfg, true); err != nil {
		return nil, fmt.Errorf("flash bench: queued: %w", err)
	}
	for _, f := range rep.Queued.Failures {
		rep.Failures = append(rep.Failures, "queued: "+f)
	}
	if cfg.Compare {
		if rep.Unqueued, _, err = flashSale(ctx, cfg, false); err != nil {
			return nil, fmt.Errorf("flash bench: unqueued: %w", err)
		}
		for _, f := range rep.Unqueued.Failures {
			rep.Failures = append(rep.Failures, "unqueued: "+f)
		}
	}
	return rep, nil
}

// flashSale runs one burst in a server of its own.
func flashSale(ctx context.Context, cfg QueuedFlashConfig, queued bool) (*FlashSaleRun, string, error) {
	began := time.Now()
	e, err := startEnv(ctx, envConfig{Binary: cfg.Binary, DB: cfg.DB, Prefix: "orderpay-qflash-", TimeScale: 1,
		LogLevel: "warn", Logger: cfg.Logger})
	if err != nil {
		return nil, "", err
	}
	defer e.close()
	run := &FlashSaleRun{Mode: "unqueued", Errors: map[string]int{}, ReadErrors: map[string]int{}, SKUsErrors: map[string]int{},
		PayErrors: map[string]int{}, TicketsDB: map[string]int{}}
	if queued {
		run.Mode = "queued"
	}
	sku, other := e.runID+"-flash", e.runID+"-other"
	c := e.client
	spec := SKUSpec{SKU: sku, MerchantID: "m-flash", Title: "Flash sale " + sku, Price: 990, Stock: int64(cfg.Units),
		ProductType: "fast", StockPolicy: "order", StockBuckets: cfg.Buckets}
	if queued {
		spec.Queued, spec.QueueWaitSeconds, spec.QueuePace = true, int64(cfg.QueueWait/time.Second), cfg.QueuePace
	}
	if err := c.AddSKU(ctx, spec, nil); err != nil {
		return nil, "", err
	}
	// The probe's goods: plenty of an ordinary SKU, paid in full.
	if err := c.AddSKU(ctx, SKUSpec{SKU: other, MerchantID: "m-flash", Price: 1990, Stock: 1_000_000, ProductType: "normal", StockPolicy: "order"}, nil); err != nil {
		return nil, "", err
	}
	// The buyers share keep-alive connections, at most Concurrency of them; the probes have
	// their own, so that they measure the server, not the buyers' queue.
	readers := max(1, cfg.Concurrency/4)
	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxConnsPerHost: cfg.Concurrency + readers,
		MaxIdleConnsPerHost: cfg.Concurrency + readers, IdleConnTimeout: time.Minute}}
	defer hc.CloseIdleConnections()
	bc := *c
	bc.HTTP, bc.RetryFor = hc, 0
	ph := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute}}
	defer ph.CloseIdleConnections()
	pc := *c
	pc.HTTP, pc.RetryFor = ph, 0

	// A burst lasts at most the queue's wait and five minutes more: a ticket not ended by
	// then is unanswered.
	burstCtx, cancel := context.WithTimeout(ctx, cfg.QueueWait+5*time.Minute)
	defer cancel()
	probeCtx, stopProbes := context.WithCancel(burstCtx)
	var probes sync.WaitGroup
	var skusLat, payLat []time.Duration
	probes.Add(2)
	go func() { defer probes.Done(); skusLat = probeCatalogue(probeCtx, &pc, run.SKUsErrors) }()
	go func() { defer probes.Done(); payLat = probePay(probeCtx, &pc, e.runID, other, run.PayErrors) }()

	start := time.Now()
	b := &burst{c: &bc, runID: e.runID, sku: sku, queued: queued, start: start, slots: make(chan struct{}, cfg.Concurrency),
		readSlots: make(chan struct{}, readers), errs: map[string]int{}, readErrs: map[string]int{}, answers: map[string]int{}}
	b.run(burstCtx, cfg.Buyers, cfg.Concurrency)
	stopProbes()
	probes.Wait()
	window := max(b.lastAnswer.Sub(start), 0)

	run.Ordered, run.SoldOut, run.Expired, run.Refused = b.answers[TicketOrdered], b.answers[TicketSoldOut], b.answers[TicketExpired], b.answers[TicketRefused]
	run.SoldOutAtOrder = int(b.soldOutAtOrder.Load())
	run.Errors, run.ReadErrors = b.errs, b.readErrs
	run.Tickets, run.Replayed, run.TicketReads = int(b.tickets.Load()), int(b.replayed.Load()), int(b.reads.Load())
	run.Unanswered = cfg.Buyers - run.Ordered - run.SoldOut - run.Expired - run.Refused - sumMap(run.Errors)
	run.IntakeSeconds = round3(b.lastIntake.Sub(start).Seconds())
	run.LastAnswerSeconds = round3(window.Seconds())
	if run.IntakeSeconds > 0 {
		run.RequestsPerSecond = round1(float64(cfg.Buyers) / run.IntakeSeconds)
	}
	slices.Sort(b.answerLat)
	run.AnswerMS = summarize(b.answerLat)
	run.SKUsMS, run.PayMS = summarize(skusLat), summarize(payLat)
	run.ProbeWindow = round3(window.Seconds())

	if err := flashSaleFromDB(ctx, e, sku, queued, start, run); err != nil {
		return nil, "", err
	}
	run.Seconds = round3(time.Since(began).Seconds())
	run.check(cfg.Units)
	return run, e.store.Dialect(), nil
}

// flashSaleFromDB reads the SKU's stock, orders and tickets into run.
func flashSaleFromDB(ctx context.Context, e *env, sku string, queued bool, start time.Time, run *FlashSaleRun) error {
	st, err := e.store.Stock(ctx, sku)
	if err != nil {
		return err
	}
	run.Available, run.Locked, run.Sold, run.Total = st.Available, st.Locked, st.Sold, st.Total
	db := e.store.DB()
	var first, last int64
	if err := db.QueryRowContext(ctx, e.store.Rebind(`SELECT COUNT(DISTINCT o.order_no), COALESCE(SUM(i.qty), 0), COALESCE(MIN(o.created_at), 0), COALESCE(MAX(o.created_at), 0)
		FROM orders o JOIN order_items i ON i.order_no = o.order_no WHERE i.sku = ?`), sku).Scan(&run.Orders, &run.OrderUnits, &first, &last); err != nil {
		return err
	}
	run.Oversold = max(run.OrderUnits-run.Total, 0)
	if run.Orders > 0 {
		from := time.UnixMilli(first)
		if run.Orders == 1 || last == first {
			from = start
		}
		span := time.UnixMilli(last).Sub(from)
		run.DrainSeconds = round3(span.Seconds())
		if span > 0 {
			run.DrainOrdersPerSecond = round1(float64(run.Orders) / span.Seconds())
		}
	}
	if !queued {
		run.LastEndSeconds = run.LastAnswerSeconds
		return nil
	}
	var lastEnd int64
	if err := db.QueryRowContext(ctx, e.store.Rebind(`SELECT COALESCE(MAX(updated_at), 0) FROM tickets WHERE sku = ? AND state <> 'WAITING'`), sku).Scan(&lastEnd); err != nil {
		return err
	}
	if lastEnd > 0 {
		run.LastEndSeconds = round3(max(time.UnixMilli(lastEnd).Sub(start), 0).Seconds())
	}
	rows, err := db.QueryContext(ctx, e.store.Rebind(`SELECT state, COUNT(*) FROM tickets WHERE sku = ? GROUP BY state`), sku)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var state string
		var n int
		if err := rows.Scan(&state, &n); err != nil {
			return err
		}
		run.TicketsDB[state] = n
	}
	if err := rows.Err(); err != nil {
		return err
	}
	run.Unended = run.TicketsDB[TicketWaiting]
	if err := db.QueryRowContext(ctx, e.store.Rebind(`SELECT COUNT(*) FROM (SELECT order_no FROM tickets WHERE sku = ? AND order_no <> ''
		GROUP BY order_no HAVING COUNT(*) > 1) shared`), sku).Scan(&run.SharedNo); err != nil {
		return err
	}
	return db.QueryRowContext(ctx, e.store.Rebind(`SELECT COUNT(DISTINCT i.order_no) FROM order_items i
		WHERE i.sku = ? AND NOT EXISTS (SELECT 1 FROM tickets t WHERE t.order_no = i.order_no)`), sku).Scan(&run.Orphans)
}

// burst is the buyers of one run: each orders one unit, and a buyer given a ticket reads
// it until it ends.
type burst struct {
	c      *Client
	runID  string
	sku    string
	queued bool
	start  time.Time
	// slots bound the buyers' orders in flight, readSlots their tickets' reads.
	slots, readSlots chan struct{}

	tickets, replayed, reads, soldOutAtOrder atomic.Int64

	mu         sync.Mutex
	answers    map[string]int // final answers by ticket state (ORDERED for a 201)
	errs       map[string]int
	readErrs   map[string]int
	answerLat  []time.Duration
	lastAnswer time.Time
	lastIntake time.Time
}

// run sends every buyer's order, workers at a time, and waits until every ticket given has
// ended or ctx ends.
func (b *burst) run(ctx context.Context, buyers, workers int) {
	next := make(chan int, workers)
	var followers, posters sync.WaitGroup
	for range workers {
		posters.Add(1)
		go func() {
			defer posters.Done()
			for i := range next {
				b.order(ctx, i, &followers)
			}
		}()
	}
	for i := range buyers {
		next <- i
	}
	close(next)
	posters.Wait()
	followers.Wait()
}

func acquire(ctx context.Context, slots chan struct{}) bool {
	select {
	case slots <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// answered records a buyer's final answer.
func (b *burst) answered(state string, t0 time.Time) {
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.answers[state]++
	b.answerLat = append(b.answerLat, now.Sub(t0))
	if now.After(b.lastAnswer) {
		b.lastAnswer = now
	}
}

func (b *burst) intake() {
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.After(b.lastIntake) {
		b.lastIntake = now
	}
}

// order is buyer i's order, and then its ticket followed, if it got one.
func (b *burst) order(ctx context.Context, i int, followers *sync.WaitGroup) {
	buyer := fmt.Sprintf("%s-buyer-%d", b.runID, i)
	c := b.c.As(buyer)
	if !acquire(ctx, b.slots) {
		return
	}
	t0 := time.Now()
	var err error
	var a *QueueAnswer
	if b.queued {
		a, err = c.QueueOrder(ctx, buyer, fmt.Sprintf("%s-q-%d", b.runID, i), Item{SKU: b.sku, Qty: 1})
	} else {
		_, err = c.CreateOrder(ctx, buyer, "", Item{SKU: b.sku, Qty: 1})
	}
	<-b.slots
	b.intake()
	switch {
	case err == nil && !b.queued:
		b.answered(TicketOrdered, t0)
	case CodeOf(err) == "EOUTOFSTOCK":
		b.soldOutAtOrder.Add(1)
		b.answered(TicketSoldOut, t0)
	case err != nil:
		if ctx.Err() == nil {
			b.mu.Lock()
			b.errs[ErrorKey(err)]++
			b.mu.Unlock()
		}
	case a.Ticket.TicketID == "":
		b.mu.Lock()
		b.errs[fmt.Sprintf("%d without a ticket", a.Status)]++
		b.mu.Unlock()
	default:
		b.tickets.Add(1)
		if a.Replayed {
			b.replayed.Add(1)
		}
		if ticketFinal(a.Ticket.State) {
			b.answered(a.Ticket.State, t0)
			return
		}
		followers.Add(1)
		go func() {
			defer followers.Done()
			b.follow(ctx, c, a.Ticket, t0)
		}()
	}
}

// follow reads the ticket until it ends, as a waiting page would: again after a pause that
// grows with its position (readPause), so that the buyers far back read seldom.
func (b *burst) follow(ctx context.Context, c *Client, t TicketView, t0 time.Time) {
	pos := t.Position
	for {
		if !sleepCtx(ctx, readPause(pos)) || !acquire(ctx, b.readSlots) {
			return
		}
		got, err := c.Ticket(ctx, t.TicketID)
		<-b.readSlots
		b.reads.Add(1)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			b.mu.Lock()
			b.readErrs[ErrorKey(err)]++
			b.mu.Unlock()
		} else if ticketFinal(got.State) {
			b.answered(got.State, t0)
			return
		} else {
			pos = got.Position
		}
	}
}

// readPause is how long a buyer at position pos waits before reading its ticket again: a
// millisecond a place ahead of it (the time a queue draining a thousand orders a second
// takes to get there), at least half a second and at most 5 s, so that a buyer far back
// hears of its end (sold out, mostly) within 5 s.
func readPause(pos int64) time.Duration {
	return min(max(time.Duration(pos)*time.Millisecond, 500*time.Millisecond), 5*time.Second)
}

// The probes' pace: a read of the catalogue every catalogueEvery, a pause of payPause
// between one paid order and the next; enough for a p99 over a few seconds, and little
// beside the burst (the probes share the machine's cores with the server and the buyers).
const (
	catalogueEvery = 20 * time.Millisecond
	payPause       = 100 * time.Millisecond
)

// probeCatalogue reads the catalogue every catalogueEvery until ctx ends, and returns each
// read's latency.
func probeCatalogue(ctx context.Context, c *Client, errs map[string]int) []time.Duration {
	var lat []time.Duration
	tick := time.NewTicker(catalogueEvery)
	defer tick.Stop()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
			return lat
		case <-tick.C:
		}
		t0 := time.Now()
		_, err := c.Catalogue(ctx)
		if ctx.Err() != nil {
			break
		}
		if err != nil {
			errs[ErrorKey(err)]++
			continue
		}
		lat = append(lat, time.Since(t0))
	}
	return lat
}

// probePay creates and pays an order of sku, then another payPause later, until ctx ends,
// each by a buyer of its own (Alipay's QR code, paid by the simulated wallet, polled every
// 5 ms until PAID), and returns each one's latency from the create to PAID seen.
func probePay(ctx context.Context, c *Client, runID, sku string, errs map[string]int) []time.Duration {
	var lat []time.Duration
	for i := 0; i == 0 || sleepCtx(ctx, payPause); i++ {
		buyer := fmt.Sprintf("%s-probe-%d", runID, i)
		bc := c.As(buyer)
		t0 := time.Now()
		call := "create"
		o, err := bc.CreateOrder(ctx, buyer, "", Item{SKU: sku, Qty: 1})
		var p *PayView
		if err == nil {
			call = "pay"
			p, err = bc.Pay(ctx, o.OrderNo, "alipay")
		}
		if err == nil {
			call = "wallet"
			err = bc.WalletPay(ctx, p.QRCode)
		}
		if err == nil {
			call = "wait"
			_, err = bc.WaitStatus(ctx, o.OrderNo, "PAID", 5*time.Millisecond)
		}
		if ctx.Err() != nil {
			break
		}
		if err != nil {
			errs[call+" "+ErrorKey(err)]++
			continue
		}
		lat = append(lat, time.Since(t0))
	}
	return lat
}

// PrintQueuedFlash writes the report as text: the queued run and the unqueued one side by
// side.
func PrintQueuedFlash(w io.Writer, r *QueuedFlashReport) {
	pace := fmt.Sprint(r.QueuePace, " orders/s")
	if r.QueuePace == 0 {
		pace = "as fast as the store commits"
	}
	fmt.Fprintf(w, "queued flash sale: 1 SKU, %d units in %d stock rows, %d buyers in one burst (%d orders and %d ticket reads in flight); queue pace %s, wait %d s; store %s\n",
		r.Units, r.Buckets, r.Buyers, r.Concurrency, max(1, r.Concurrency/4), pace, r.QueueWaitS, r.Store)
	runs := []*FlashSaleRun{r.Queued}
	if r.Unqueued != nil {
		runs = append(runs, r.Unqueued)
	}
	row := func(label string, f func(*FlashSaleRun) string) {
		fmt.Fprintf(w, "  %-44s", label)
		for _, run := range runs {
			fmt.Fprintf(w, " %22s", f(run))
		}
		fmt.Fprintln(w)
	}
	row("", func(run *FlashSaleRun) string { return run.Mode })
	row("buyers answered: ordered", func(run *FlashSaleRun) string { return fmt.Sprint(run.Ordered) })
	row("  sold out (of them at the order, 409)", func(run *FlashSaleRun) string {
		return fmt.Sprintf("%d (%d)", run.SoldOut, run.SoldOutAtOrder)
	})
	row("  expired / refused", func(run *FlashSaleRun) string { return fmt.Sprintf("%d / %d", run.Expired, run.Refused) })
	row("  unanswered / errors", func(run *FlashSaleRun) string {
		return fmt.Sprintf("%d / %d", run.Unanswered, sumMap(run.Errors))
	})
	row("tickets given (replayed), ticket reads", func(run *FlashSaleRun) string {
		return fmt.Sprintf("%d (%d), %d", run.Tickets, run.Replayed, run.TicketReads)
	})
	row("burst → last order answered, s", func(run *FlashSaleRun) string { return fmt.Sprintf("%.2f", run.IntakeSeconds) })
	row("burst → last buyer answered, s", func(run *FlashSaleRun) string { return fmt.Sprintf("%.2f", run.LastAnswerSeconds) })
	row("burst → last ticket ended (server), s", func(run *FlashSaleRun) string {
		if run.Mode != "queued" {
			return "-"
		}
		return fmt.Sprintf("%.2f", run.LastEndSeconds)
	})
	row("orders/s during the drain (over s)", func(run *FlashSaleRun) string {
		return fmt.Sprintf("%.1f (%.2f)", run.DrainOrdersPerSecond, run.DrainSeconds)
	})
	row("order → final answer p50 / p99, ms", func(run *FlashSaleRun) string {
		return fmt.Sprintf("%.0f / %.0f", run.AnswerMS.P50, run.AnswerMS.P99)
	})
	row("GET /v1/skus p50 / p99, ms (reads)", func(run *FlashSaleRun) string {
		return fmt.Sprintf("%.1f / %.1f (%d)", run.SKUsMS.P50, run.SKUsMS.P99, run.SKUsMS.Count)
	})
	row("pay another SKU p50 / p99, ms (orders)", func(run *FlashSaleRun) string {
		return fmt.Sprintf("%.1f / %.1f (%d)", run.PayMS.P50, run.PayMS.P99, run.PayMS.Count)
	})
	row("stock available / locked / sold of total", func(run *FlashSaleRun) string {
		return fmt.Sprintf("%d / %d / %d of %d", run.Available, run.Locked, run.Sold, run.Total)
	})
	row("orders of the SKU, their units; oversold", func(run *FlashSaleRun) string {
		return fmt.Sprintf("%d, %d; %d", run.Orders, run.OrderUnits, run.Oversold)
	})
	row("tickets in the database, still WAITING", func(run *FlashSaleRun) string {
		if run.Mode != "queued" {
			return "-"
		}
		return fmt.Sprintf("%d, %d", sumMap(run.TicketsDB), run.Unended)
	})
	row("result", func(run *FlashSaleRun) string {
		if len(run.Failures) > 0 {
			return "FAIL"
		}
		return "PASS"
	})
	for _, run := range runs {
		for _, f := range run.Failures {
			fmt.Fprintf(w, "  %s: %s\n", run.Mode, f)
		}
		if len(run.ReadErrors) > 0 || len(run.SKUsErrors) > 0 || len(run.PayErrors) > 0 {
			fmt.Fprintf(w, "  %s: errors of ticket reads %s; of the catalogue probe %s; of the pay probe %s\n", run.Mode,
				errorList(run.ReadErrors), errorList(run.SKUsErrors), errorList(run.PayErrors))
		}
	}
}

// errorList is a map of error keys as "key ×n, …", sorted, or "none".
func errorList(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, fmt.Sprintf("%s ×%d", k, m[k]))
	}
	return strings.Join(out, ", ")
}
