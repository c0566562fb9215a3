package order

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"orderpay"
)

// Queued admission (docs/design.md §6.1, 削峰填谷): the order request of a queued SKU takes a
// ticket at once (Place), the ticket's message goes onto the bus with it, and the order
// system's consumer (HandleTicket) makes the orders of each SKU's tickets in the order they
// arrived, at the SKU's pace, through the same createOrder as any order. The ticket ends in
// the transaction that makes its order, so a ticket delivered twice, or served by two
// instances at once, makes one order: the second finds it ended and its transaction rolls
// back.

// queues is the Service's state of the queues: which SKUs are queued (a SKU's flag never
// changes once it exists, so it is read once), and each SKU's pace.
type queues struct {
	queued sync.Map // sku -> bool
	mu     sync.Mutex
	pace   map[string]*rate.Limiter
	views  map[string]*queueView
}

// queueView is one SKU's queue as last read: the Seqs of its waiting tickets, in order.
// Positions are counted in it, so that a buyer's poll costs a key lookup and a binary
// search, not a count of everyone ahead. It is read again when older than queueViewAge, by
// one reader at a time and outside its lock (the others count in the view they have); the
// tickets this instance ends meanwhile are noted (ended) and not counted, so that its own
// moves show at once without a read of the whole queue.
type queueView struct {
	mu      sync.Mutex
	at      time.Time
	seqs    []int64
	ended   []int64 // Seqs in seqs this instance ended since the read
	loading bool
	gone    bool // this instance ended tickets it did not note: read again at the next look
}

// queueViewAge is how old a view of a queue may be.
const queueViewAge = 250 * time.Millisecond

// view is sku's queue view, made on first use.
func (q *queues) view(sku string) *queueView {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.views == nil {
		q.views = map[string]*queueView{}
	}
	v := q.views[sku]
	if v == nil {
		v = &queueView{}
		q.views[sku] = v
	}
	return v
}

// ended notes tickets of sku this instance just ended (no seqs: some it did not name, which
// makes the view be read again).
func (q *queues) ended(sku string, seqs ...int64) {
	v := q.view(sku)
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(seqs) == 0 {
		v.gone = true
		return
	}
	for _, seq := range seqs {
		if _, in := slices.BinarySearch(v.seqs, seq); in && !slices.Contains(v.ended, seq) {
			v.ended = append(v.ended, seq)
		}
	}
}

// position is the place of the waiting ticket (seq) in the view, and whether the ticket is
// in it; refresh says the view is due to be read again (and this caller is to do it).
func (v *queueView) position(seq int64, now time.Time) (pos int64, in, refresh bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if (now.Sub(v.at) >= queueViewAge || v.gone) && !v.loading {
		v.loading, refresh = true, true
	}
	i, in := slices.BinarySearch(v.seqs, seq)
	pos = int64(i) + 1
	for _, e := range v.ended {
		if e >= seq {
			continue
		}
		// Only an end the read counted: one of a ticket that arrived after the read is
		// not in the i before it.
		if _, counted := slices.BinarySearch(v.seqs, e); counted {
			pos--
		}
	}
	return pos, in, refresh
}

// load puts a fresh read of the queue (begun at at) in the view: the noted ends it reflects
// are dropped.
func (v *queueView) load(seqs []int64, at time.Time, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.loading = false
	if err != nil {
		return
	}
	kept := v.ended[:0]
	for _, e := range v.ended {
		if _, in := slices.BinarySearch(seqs, e); in {
			kept = append(kept, e) // ended after the read saw it waiting
		}
	}
	v.at, v.seqs, v.ended, v.gone = at, seqs, kept, false
}

// Placed is what a buyer's order request became: an order, or a ticket in a queued SKU's
// queue. Replayed says it is one an earlier request made (the same Idempotency-Key; for a
// ticket also the buyer's live ticket of the SKU).
type Placed struct {
	Order    *orderpay.Order
	Ticket   *orderpay.Ticket
	Replayed bool
}

// ticketRequest is what of the buyer's request a ticket keeps for its order.
type ticketRequest struct {
	CouponID string           `json:"coupon_id,omitempty"`
	DeviceID string           `json:"device_id,omitempty"`
	Address  orderpay.Address `json:"address"`
}

// Place is how a buyer orders: an order at once (Create), or, for a queued SKU, a ticket.
func (s *Service) Place(ctx context.Context, req CreateOrderRequest) (Placed, error) {
	if err := s.validate(req); err != nil {
		return Placed{}, err
	}
	for _, it := range req.Items {
		queued, err := s.isQueued(ctx, it.SKU)
		if err != nil {
			return Placed{}, err
		}
		if queued {
			t, replayed, err := s.admit(ctx, req)
			return Placed{Ticket: t, Replayed: replayed}, err
		}
	}
	o, replayed, err := s.Create(ctx, req)
	return Placed{Order: o, Replayed: replayed}, err
}

// isQueued says whether sku is queued; a SKU that does not exist is not (Create refuses it).
func (s *Service) isQueued(ctx context.Context, sku string) (bool, error) {
	if q, ok := s.q.queued.Load(sku); ok {
		return q.(bool), nil
	}
	k, err := s.cfg.Store.SKU(ctx, sku)
	if orderpay.ErrorCode(err) == orderpay.ENOTFOUND {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	s.q.queued.Store(sku, k.Queued)
	return k.Queued, nil
}

// admit gives the buyer a ticket: checked as far as it can be without the order (the
// blocklist, the request key, the per-order cap and purchase limit, the stock that is left),
// then written with its message in one transaction.
func (s *Service) admit(ctx context.Context, req CreateOrderRequest) (*orderpay.Ticket, bool, error) {
	if len(req.Items) != 1 {
		return nil, false, orderpay.Errorf(orderpay.EINVALID, "a queued sku is ordered alone: one line, no other items")
	}
	it := req.Items[0]
	sku, err := s.cfg.Store.SKU(ctx, it.SKU)
	if err != nil {
		return nil, false, err
	}
	key, err := requestKey(req)
	if err != nil {
		return nil, false, err
	}
	if req.IdempotencyKey == "" {
		key.Key = "" // without a client key, the buyer's one live ticket per SKU is the guard
	}
	blocked, _, err := s.cfg.Store.CreateChecks(ctx, req.BuyerID, req.DeviceID, "")
	if err != nil {
		return nil, false, err
	}
	if err := refuseBlocked(blocked); err != nil {
		return nil, false, err
	}
	if t, err := s.earlierTicket(ctx, req.BuyerID, sku.SKU, key); t != nil || err != nil {
		return t, t != nil, err
	}
	if c := s.capOf(sku); c.PerOrder > 0 && it.Qty > c.PerOrder {
		return nil, false, orderpay.Errorf(orderpay.EQUANTITYCAP, "sku %s: at most %d units in one order", sku.SKU, c.PerOrder)
	}
	if sku.LimitPerBuyer > 0 {
		held, err := s.cfg.Store.BuyerPurchases(ctx, req.BuyerID, sku.SKU)
		if err != nil {
			return nil, false, err
		}
		if held+it.Qty > sku.LimitPerBuyer {
			return nil, false, orderpay.Errorf(orderpay.ELIMIT, "sku %s: at most %d units per buyer", sku.SKU, sku.LimitPerBuyer)
		}
	}
	st, err := s.cfg.Store.Stock(ctx, sku.SKU)
	if err != nil {
		return nil, false, err
	}
	if st.Available < it.Qty {
		return nil, false, orderpay.Errorf(orderpay.EOUTOFSTOCK, "sku %q is sold out", sku.SKU)
	}
	body, err := json.Marshal(ticketRequest{CouponID: req.CouponID, DeviceID: req.DeviceID, Address: req.Address})
	if err != nil {
		return nil, false, err
	}
	now := orderpay.Now(s.cfg.Clock)
	wait := sku.QueueWait
	if wait <= 0 {
		wait = orderpay.QueueWaitDefault
	}
	t := &orderpay.Ticket{ID: orderpay.NewTicketID(), SKU: sku.SKU, BuyerID: req.BuyerID, Qty: it.Qty, Request: string(body),
		Key: key.Key, RequestHash: key.RequestHash, CreatedAt: now, ExpiresAt: now.Add(wait)}
	err = s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) error {
		if err := tx.CreateTicket(ctx, t); err != nil {
			return err
		}
		return orderpay.EnqueueJSON(ctx, tx, orderpay.SubjectTicketQueued, t.ID,
			orderpay.TicketPayload{TicketID: t.ID, SKU: t.SKU, Seq: t.Seq, At: now}, now)
	})
	if orderpay.ErrorCode(err) == orderpay.ECONFLICT {
		// An identical request, or another of the buyer's for this SKU, won the insert.
		if t, err := s.earlierTicket(ctx, req.BuyerID, sku.SKU, key); t != nil || err != nil {
			return t, t != nil, err
		}
		return nil, false, orderpay.Errorf(orderpay.EUNAVAILABLE, "an identical request is being processed; retry")
	}
	if err != nil {
		return nil, false, err
	}
	s.cfg.OutboxWritten()
	s.log.Info("ticket queued", "ticket_id", t.ID, "sku", t.SKU, "buyer_id", t.BuyerID, "seq", t.Seq)
	got, err := s.Ticket(ctx, t.ID)
	if err != nil {
		return t, false, nil // written; its position is read with the next look
	}
	return got, false, nil
}

// earlierTicket is the ticket an earlier request made for this one: the one made with the
// same Idempotency-Key (another request under it is EIDEMPOTENCY), or the buyer's live ticket
// of the SKU. nil if there is none.
func (s *Service) earlierTicket(ctx context.Context, buyerID, sku string, key *orderpay.RequestKey) (*orderpay.Ticket, error) {
	if key.Key != "" {
		t, err := s.cfg.Store.TicketByKey(ctx, buyerID, key.Key)
		switch {
		case err == nil && t.RequestHash != key.RequestHash:
			return nil, orderpay.Errorf(orderpay.EIDEMPOTENCY, "this Idempotency-Key was used for another request")
		case err == nil:
			return s.withPosition(ctx)(t, nil)
		case orderpay.ErrorCode(err) != orderpay.ENOTFOUND:
			return nil, err
		}
	}
	t, err := s.cfg.Store.LiveTicket(ctx, buyerID, sku)
	if orderpay.ErrorCode(err) == orderpay.ENOTFOUND {
		return nil, nil
	}
	return s.withPosition(ctx)(t, err)
}

// Ticket reads a ticket with its position.
func (s *Service) Ticket(ctx context.Context, id string) (*orderpay.Ticket, error) {
	if !orderpay.ValidTicketID(id) {
		return nil, orderpay.NotFound("ticket", id)
	}
	return s.withPosition(ctx)(s.cfg.Store.Ticket(ctx, id))
}

// withPosition fills in the position of a waiting ticket as read: 1 and the waiting tickets
// of its SKU that arrived before it, counted in the SKU's queue view (at most queueViewAge
// old, less what this instance ended since), and, for a ticket that arrived after the view
// was read, those that arrived between, counted on the queue's index. A ticket another
// instance ended since the read is counted until the next.
func (s *Service) withPosition(ctx context.Context) func(*orderpay.Ticket, error) (*orderpay.Ticket, error) {
	return func(t *orderpay.Ticket, err error) (*orderpay.Ticket, error) {
		if err != nil || t.State != orderpay.TicketWaiting {
			return t, err
		}
		v := s.q.view(t.SKU)
		now := time.Now()
		pos, in, refresh := v.position(t.Seq, now)
		if refresh {
			seqs, err := s.cfg.Store.WaitingSeqs(ctx, t.SKU)
			v.load(seqs, now, err)
			if err != nil {
				return nil, err
			}
			pos, in, _ = v.position(t.Seq, now)
		}
		if !in {
			// It arrived after the view was read: those who arrived between count too,
			// on the queue's index, bounded by the arrivals since the read.
			v.mu.Lock()
			last := int64(0)
			if i, _ := slices.BinarySearch(v.seqs, t.Seq); i > 0 {
				last = v.seqs[i-1]
			}
			v.mu.Unlock()
			n, err := s.cfg.Store.CountWaiting(ctx, t.SKU, last, t.Seq)
			if err != nil {
				return nil, err
			}
			pos += n - 1
		}
		// Read waiting, it is at least first: a turn that ended it after the read (it was
		// not counted among the waiting, nor those before it) does not make it 0.
		t.Position = max(pos, 1)
		return t, nil
	}
}

// HandleTicket is the order system's consumer of ticket.queued. The message names a ticket;
// the ticket is read from the store (the message is not trusted for anything else), the
// waiting tickets of its SKU that arrived before it are served first, then it. So the
// orders of a SKU are made in arrival order whatever order the bus delivers in (a retried
// message comes late), and a message delivered again finds its ticket ended and does
// nothing.
func (s *Service) HandleTicket(ctx context.Context, m orderpay.Message) error {
	var p orderpay.TicketPayload
	if err := json.Unmarshal(m.Payload, &p); err != nil || !orderpay.ValidTicketID(p.TicketID) {
		s.log.Warn("ticket message without a ticket: dropped", "id", m.ID)
		return nil
	}
	t, err := s.cfg.Store.Ticket(ctx, p.TicketID)
	if orderpay.ErrorCode(err) == orderpay.ENOTFOUND {
		s.log.Warn("ticket message of an unknown ticket: dropped", "ticket_id", p.TicketID)
		return nil
	}
	if err != nil {
		return err
	}
	sku, err := s.cfg.Store.SKU(ctx, t.SKU)
	if err != nil {
		return err
	}
	if t.State != orderpay.TicketWaiting {
		// Served already, by a batch before it. Without a pace, its message serves the
		// next batch of the queue, if there is one: every message moves the queue on, not
		// only those whose tickets still wait.
		if sku.QueuePace > 0 {
			return nil
		}
		batch, err := s.cfg.Store.WaitingTickets(ctx, t.SKU, 0, serveBatch)
		if err != nil || len(batch) == 0 {
			return err
		}
		return s.serveAll(ctx, sku, batch)
	}
	// The queue from its head up to this ticket, a batch at a time; then, for a SKU
	// without a pace, one batch beyond it: the messages of those tickets then find them
	// ended, and a burst's orders are made a batch per transaction, not one per message.
	for ahead := true; ; {
		batch, err := s.cfg.Store.WaitingTickets(ctx, t.SKU, t.Seq+1, serveBatch)
		if err != nil {
			return err
		}
		if len(batch) == 0 || sku.QueuePace <= 0 && len(batch) < serveBatch {
			if sku.QueuePace <= 0 && ahead {
				if batch, err = s.cfg.Store.WaitingTickets(ctx, t.SKU, 0, serveBatch); err != nil {
					return err
				}
				ahead = false
			}
		}
		if len(batch) == 0 {
			return nil
		}
		if err := s.serveAll(ctx, sku, batch); err != nil {
			return err
		}
	}
}

// serveBatch is how many tickets one transaction serves.
const serveBatch = 32

// serveAll serves tickets (waiting, of sku, in arrival order): one at a time at the SKU's
// pace, or, without one, all in one transaction, each ticket's order in a savepoint of its
// own, so that a ticket sold out or refused ends alone and the others' orders stand.
func (s *Service) serveAll(ctx context.Context, sku *orderpay.SKU, ts []orderpay.Ticket) error {
	if sku.QueuePace > 0 {
		for i := range ts {
			if err := s.serve(ctx, &ts[i]); err != nil {
				return err
			}
		}
		return nil
	}
	// What is decided before the transaction: a ticket past its wait, one whose request
	// cannot be read, one whose buyer was blocked meanwhile; the others' order numbers.
	type turn struct {
		t      *orderpay.Ticket
		req    CreateOrderRequest
		no     string
		end    orderpay.TicketState // "" to order
		reason string
		order  *orderpay.Order
	}
	now := orderpay.Now(s.cfg.Clock)
	turns := make([]turn, len(ts))
	for i := range ts {
		tu := &turns[i]
		tu.t = &ts[i]
		if !now.Before(tu.t.ExpiresAt) {
			tu.end = orderpay.TicketExpired
			continue
		}
		var tr ticketRequest
		if err := json.Unmarshal([]byte(tu.t.Request), &tr); err != nil {
			tu.end, tu.reason = orderpay.TicketRefused, "the ticket's request cannot be read"
			continue
		}
		blocked, _, err := s.cfg.Store.CreateChecks(ctx, tu.t.BuyerID, tr.DeviceID, "")
		if err != nil {
			return err
		}
		if err := refuseBlocked(blocked); err != nil {
			tu.end, tu.reason = orderpay.TicketRefused, orderpay.ErrorMessage(err)
			continue
		}
		tu.req = CreateOrderRequest{BuyerID: tu.t.BuyerID, Items: []ItemRequest{{SKU: tu.t.SKU, Qty: tu.t.Qty}}, DeviceID: tr.DeviceID,
			CouponID: tr.CouponID, Address: tr.Address}
		if tu.no, err = s.cfg.NewOrderNo(ctx, now); err != nil {
			return err
		}
	}
	soldOut := false
	err := s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) error {
		soldOut = false
		for i := range turns {
			tu := &turns[i]
			tu.order = nil
			if tu.no != "" {
				tu.end, tu.reason = "", ""
				err := tx.Savepoint(ctx, func() error {
					o, err := s.createOrderIn(ctx, tx, tu.req, nil, tu.no, now, func(tx orderpay.Tx, o *orderpay.Order) error {
						return tx.EndTicket(ctx, tu.t.ID, orderpay.TicketOrdered, o.No, "", now)
					})
					tu.order = o
					return err
				})
				switch code := orderpay.ErrorCode(err); {
				case err == nil:
					continue
				case errors.Is(err, errOrderNoTaken) || code == "" || code == orderpay.EUNAVAILABLE || code == orderpay.EINTERNAL:
					return err // the batch again, at the message's next delivery
				case code == orderpay.EOUTOFSTOCK:
					tu.end, soldOut = orderpay.TicketSoldOut, true
				default:
					tu.end, tu.reason = orderpay.TicketRefused, orderpay.ErrorMessage(err)
				}
				tu.order = nil
			}
			// Ended here, unless it was ended meanwhile (another instance served it).
			err := tx.EndTicket(ctx, tu.t.ID, tu.end, "", tu.reason, now)
			if orderpay.ErrorCode(err) == orderpay.ECONFLICT {
				tu.end = ""
				continue
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	var ended []int64
	for _, tu := range turns {
		switch {
		case tu.order != nil:
			s.log.Info("ticket ordered", "ticket_id", tu.t.ID, "order_no", tu.order.No, "sku", tu.t.SKU, "buyer_id", tu.t.BuyerID)
		case tu.end != "":
			s.log.Info("ticket ended", "ticket_id", tu.t.ID, "state", tu.end, "sku", tu.t.SKU, "reason", tu.reason)
		default:
			continue
		}
		ended = append(ended, tu.t.Seq)
	}
	if len(ended) > 0 {
		s.q.ended(sku.SKU, ended...)
		s.cfg.OutboxWritten()
	}
	if soldOut {
		_, err := s.soldOutIfGone(ctx, sku.SKU)
		return err
	}
	return nil
}

// serve makes the order of one waiting ticket, or ends it: expired past its bound, sold out
// (and with it every waiting ticket of the SKU once no unit is left), or refused for a reason
// of the buyer's. A failure that may pass (the store, a conflict with a concurrent order) is
// returned, for the message to be delivered again.
func (s *Service) serve(ctx context.Context, t *orderpay.Ticket) error {
	if now := orderpay.Now(s.cfg.Clock); !now.Before(t.ExpiresAt) {
		return s.endTicket(ctx, t, orderpay.TicketExpired, "")
	}
	sku, err := s.cfg.Store.SKU(ctx, t.SKU)
	if err != nil {
		return err
	}
	if err := s.pace(ctx, sku); err != nil {
		return err
	}
	var tr ticketRequest
	if err := json.Unmarshal([]byte(t.Request), &tr); err != nil {
		return s.endTicket(ctx, t, orderpay.TicketRefused, "the ticket's request cannot be read")
	}
	req := CreateOrderRequest{BuyerID: t.BuyerID, Items: []ItemRequest{{SKU: t.SKU, Qty: t.Qty}}, DeviceID: tr.DeviceID,
		CouponID: tr.CouponID, Address: tr.Address}
	// The buyer may have been blocked while the ticket waited.
	blocked, _, err := s.cfg.Store.CreateChecks(ctx, t.BuyerID, tr.DeviceID, "")
	if err != nil {
		return err
	}
	if err := refuseBlocked(blocked); err != nil {
		return s.endTicket(ctx, t, orderpay.TicketRefused, orderpay.ErrorMessage(err))
	}
	for attempt := 0; ; attempt++ {
		now := orderpay.Now(s.cfg.Clock)
		o, err := s.createOrder(ctx, req, nil, func(tx orderpay.Tx, o *orderpay.Order) error {
			return tx.EndTicket(ctx, t.ID, orderpay.TicketOrdered, o.No, "", now)
		})
		if errors.Is(err, errOrderNoTaken) && attempt < 5 {
			continue
		}
		switch code := orderpay.ErrorCode(err); {
		case err == nil:
			s.q.ended(t.SKU, t.Seq)
			s.cfg.OutboxWritten()
			s.log.Info("ticket ordered", "ticket_id", t.ID, "order_no", o.No, "sku", t.SKU, "buyer_id", t.BuyerID)
			return nil
		case code == orderpay.EOUTOFSTOCK:
			if err := s.endTicket(ctx, t, orderpay.TicketSoldOut, ""); err != nil {
				return err
			}
			_, err := s.soldOutIfGone(ctx, t.SKU)
			return err
		case code == "" || code == orderpay.EUNAVAILABLE || code == orderpay.EINTERNAL:
			return err
		default:
			// The ticket may have been ended meanwhile (another instance served it): then
			// the conflict is that, and nothing is left to do.
			cur, rerr := s.cfg.Store.Ticket(ctx, t.ID)
			if rerr != nil {
				return rerr
			}
			if cur.State != orderpay.TicketWaiting {
				return nil
			}
			return s.endTicket(ctx, t, orderpay.TicketRefused, orderpay.ErrorMessage(err))
		}
	}
}

// endTicket ends one waiting ticket; one ended meanwhile is left as it is.
func (s *Service) endTicket(ctx context.Context, t *orderpay.Ticket, to orderpay.TicketState, reason string) error {
	err := s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) error {
		return tx.EndTicket(ctx, t.ID, to, "", reason, orderpay.Now(s.cfg.Clock))
	})
	if orderpay.ErrorCode(err) == orderpay.ECONFLICT {
		return nil
	}
	if err == nil {
		s.q.ended(t.SKU, t.Seq)
		s.log.Info("ticket ended", "ticket_id", t.ID, "state", to, "sku", t.SKU, "reason", reason)
	}
	return err
}

// soldOutIfGone ends every waiting ticket of sku as sold out if no unit of it is left to
// sell, and says how many it ended.
func (s *Service) soldOutIfGone(ctx context.Context, sku string) (int, error) {
	st, err := s.cfg.Store.Stock(ctx, sku)
	if err != nil || st.Available > 0 {
		return 0, err
	}
	var n int
	err = s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) error {
		var err error
		n, err = tx.EndWaitingTickets(ctx, sku, 0, orderpay.TicketSoldOut, orderpay.Now(s.cfg.Clock))
		return err
	})
	if n > 0 {
		s.q.ended(sku)
		s.log.Info("queue sold out", "sku", sku, "tickets", n)
	}
	return n, err
}

// pace waits for the SKU's turn: at most QueuePace orders a second from this instance (no
// wait for a SKU without a pace).
func (s *Service) pace(ctx context.Context, sku *orderpay.SKU) error {
	if sku.QueuePace <= 0 {
		return nil
	}
	s.q.mu.Lock()
	if s.q.pace == nil {
		s.q.pace = map[string]*rate.Limiter{}
	}
	l := s.q.pace[sku.SKU]
	if l == nil {
		l = rate.NewLimiter(rate.Limit(sku.QueuePace), 1)
		s.q.pace[sku.SKU] = l
	}
	s.q.mu.Unlock()
	return l.Wait(ctx)
}

// TicketSweep counts what one pass of the ticket sweeper did.
type TicketSweep struct {
	Expired, SoldOut int
}

// SweepTickets ends what waits in vain: the tickets past their bound (expired), and every
// waiting ticket of a SKU with no unit left (sold out), so that buyers hear within a pass,
// not at their expiry. Bounded by the queues, not by the tickets' history.
func (s *Service) SweepTickets(ctx context.Context) (TicketSweep, error) {
	var res TicketSweep
	queued, err := s.cfg.Store.QueuedSKUs(ctx)
	if err != nil {
		return res, err
	}
	for sku, earliest := range queued {
		if now := orderpay.Now(s.cfg.Clock); !now.Before(earliest) {
			var n int
			err := s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) error {
				var err error
				n, err = tx.EndWaitingTickets(ctx, sku, 0, orderpay.TicketExpired, now)
				return err
			})
			if err != nil {
				return res, err
			}
			if n > 0 {
				s.q.ended(sku)
			}
			res.Expired += n
		}
		n, err := s.soldOutIfGone(ctx, sku)
		if err != nil {
			return res, err
		}
		res.SoldOut += n
	}
	return res, nil
}

// validateQueue checks and defaults a new SKU's queue settings.
func (n *NewSKU) validateQueue() error {
	if !n.Queued {
		if n.QueueWait != 0 || n.QueuePace != 0 {
			return orderpay.Errorf(orderpay.EINVALID, "queue_wait_seconds and queue_pace apply only to a queued sku")
		}
		return nil
	}
	if n.QueueWait == 0 {
		n.QueueWait = orderpay.QueueWaitDefault
	}
	if n.QueueWait < time.Second || n.QueueWait > orderpay.QueueWaitMax {
		return orderpay.Errorf(orderpay.EINVALID, "queue_wait_seconds must be between 1 and %d", int64(orderpay.QueueWaitMax/time.Second))
	}
	if n.QueuePace < 0 || n.QueuePace > orderpay.QueuePaceMax {
		return orderpay.Errorf(orderpay.EINVALID, "queue_pace must be between 0 (as fast as the store commits) and %d orders a second", orderpay.QueuePaceMax)
	}
	return nil
}
