package order_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"orderpay"
	"orderpay/order"
	"orderpay/sqlstore/storetest"
)

// engines runs f on SQLite, and on PostgreSQL when ORDERPAY_TEST_PG is set.
func engines(t *testing.T, f func(t *testing.T, s orderpay.Store)) {
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); f(t, storetest.OpenSQLite(t)) })
	t.Run("postgres", func(t *testing.T) { t.Parallel(); f(t, storetest.OpenPostgres(t)) })
}

// queuedSetup makes the queued SKU "flash" of units. Without a pace, a ticket's message
// serves the queue up to it and a batch beyond; a paced SKU's message serves up to its
// ticket only (pacedSetup), which the tests that follow one ticket at a time use.
func queuedSetup(t *testing.T, s orderpay.Store, units int64) bundle {
	return queuedSetupPaced(t, s, units, 0)
}

func pacedSetup(t *testing.T, s orderpay.Store, units int64) bundle {
	return queuedSetupPaced(t, s, units, orderpay.QueuePaceMax)
}

func queuedSetupPaced(t *testing.T, s orderpay.Store, units, pace int64) bundle {
	t.Helper()
	b := setup(t, s, order.Config{})
	if _, _, err := b.svc.CreateSKU(context.Background(), order.NewSKU{SKU: "flash", MerchantID: "m1", Title: "Flash sale phone",
		Price: 99900, Stock: units, ProductType: orderpay.ProductSpecial, StockBuckets: 4, Queued: true, QueueWait: time.Minute, QueuePace: pace}); err != nil {
		t.Fatal(err)
	}
	return b
}

func take(t *testing.T, b bundle, buyer string, qty int64, key string) order.Placed {
	t.Helper()
	p, err := b.svc.Place(context.Background(), order.CreateOrderRequest{BuyerID: buyer, IdempotencyKey: key,
		Items: []order.ItemRequest{{SKU: "flash", Qty: qty}}})
	if err != nil {
		t.Fatalf("%s: %v", buyer, err)
	}
	if p.Ticket == nil || p.Order != nil {
		t.Fatalf("%s: placed %+v, want a ticket and no order", buyer, p)
	}
	return p
}

// ticketMessages are the outbox's ticket.queued messages, by ticket id.
func ticketMessages(t *testing.T, b bundle) map[string]orderpay.Message {
	t.Helper()
	msgs, err := b.store.UnpublishedMessages(context.Background(), 100000)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]orderpay.Message{}
	for _, m := range msgs {
		if m.Subject == orderpay.SubjectTicketQueued {
			out[m.ID[len(orderpay.SubjectTicketQueued)+1:]] = m
		}
	}
	return out
}

func ticketOf(t *testing.T, b bundle, id string) *orderpay.Ticket {
	t.Helper()
	tk, err := b.svc.Ticket(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func TestQueuedSKUAnswersWithATicketInArrivalOrder(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, s orderpay.Store) {
		b := queuedSetup(t, s, 10)
		ctx := context.Background()
		var ids []string
		for i := range 3 {
			p := take(t, b, fmt.Sprintf("buyer%d", i), 1, "")
			if p.Replayed || p.Ticket.State != orderpay.TicketWaiting || p.Ticket.Position != int64(i+1) || !orderpay.ValidTicketID(p.Ticket.ID) {
				t.Fatalf("ticket %d: %+v", i, p.Ticket)
			}
			ids = append(ids, p.Ticket.ID)
		}
		// The buyer's live ticket comes back, for any body; a client key likewise, and the
		// same key for another request is refused.
		if p := take(t, b, "buyer1", 2, ""); !p.Replayed || p.Ticket.ID != ids[1] || p.Ticket.Position != 2 {
			t.Errorf("a second request of buyer1: %+v", p)
		}
		k1 := take(t, b, "keyed", 1, "k-1")
		if p := take(t, b, "keyed", 1, "k-1"); !p.Replayed || p.Ticket.ID != k1.Ticket.ID {
			t.Errorf("the same key again: %+v, want %s", p, k1.Ticket.ID)
		}
		if _, err := b.svc.Place(ctx, order.CreateOrderRequest{BuyerID: "keyed", IdempotencyKey: "k-1",
			Items: []order.ItemRequest{{SKU: "flash", Qty: 2}}}); orderpay.ErrorCode(err) != orderpay.EIDEMPOTENCY {
			t.Errorf("the key with another request: %v, want EIDEMPOTENCY", err)
		}
		// No way round the queue: with another SKU, or straight to Create.
		if _, err := b.svc.Place(ctx, order.CreateOrderRequest{BuyerID: "mixed", Items: []order.ItemRequest{{SKU: "tea", Qty: 1}, {SKU: "flash", Qty: 1}}}); orderpay.ErrorCode(err) != orderpay.EINVALID {
			t.Errorf("a queued SKU with another line: %v, want EINVALID", err)
		}
		if _, err := b.svc.CreateOrder(ctx, order.CreateOrderRequest{BuyerID: "direct", Items: []order.ItemRequest{{SKU: "flash", Qty: 1}}}); orderpay.ErrorCode(err) != orderpay.EINVALID {
			t.Errorf("Create of a queued SKU: %v, want EINVALID", err)
		}
		// A normal SKU is not queued.
		if p, err := b.svc.Place(ctx, order.CreateOrderRequest{BuyerID: "normal", Items: []order.ItemRequest{{SKU: "tea", Qty: 1}}}); err != nil || p.Order == nil || p.Ticket != nil {
			t.Errorf("a normal SKU: %+v, %v", p, err)
		}
		if st := stockOf(t, s, "flash"); st.Locked != 0 || st.Available != 10 {
			t.Errorf("tickets took stock: %+v", st)
		}
	})
}

// The bus may deliver the last ticket first (a retried message comes late): the consumer
// serves the SKU's earlier tickets before it. With 2 units and 3 tickets, the first two
// arrivals get the orders and the third is sold out, whatever the delivery order; a message
// delivered again makes nothing.
func TestTicketsBecomeOrdersInArrivalOrderWhateverTheDeliveryOrder(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, s orderpay.Store) {
		b := queuedSetup(t, s, 2)
		ctx := context.Background()
		var ids []string
		for i := range 4 {
			ids = append(ids, take(t, b, fmt.Sprintf("buyer%d", i), 1, "").Ticket.ID)
		}
		msgs := ticketMessages(t, b)
		if len(msgs) != 4 {
			t.Fatalf("%d ticket messages, want 4", len(msgs))
		}
		for _, id := range []string{ids[2], ids[2], ids[0], ids[3], ids[1]} {
			if err := b.svc.HandleTicket(ctx, msgs[id]); err != nil {
				t.Fatal(err)
			}
		}
		orders := map[string]bool{}
		for i, id := range ids {
			tk := ticketOf(t, b, id)
			want := orderpay.TicketOrdered
			if i >= 2 {
				want = orderpay.TicketSoldOut
			}
			if tk.State != want || tk.Position != 0 {
				t.Errorf("ticket %d: %s position %d, want %s", i, tk.State, tk.Position, want)
			}
			if want == orderpay.TicketOrdered {
				o, err := b.store.Order(ctx, tk.OrderNo)
				if err != nil || o.BuyerID != tk.BuyerID || o.Status != orderpay.OrderPendingPayment || len(o.Items) != 1 || o.Items[0].SKU != "flash" {
					t.Errorf("ticket %d's order %s: %+v, %v", i, tk.OrderNo, o, err)
				}
				orders[tk.OrderNo] = true
			}
		}
		if st := stockOf(t, s, "flash"); len(orders) != 2 || st.Locked != 2 || st.Available != 0 {
			t.Errorf("orders %v, stock %+v: want 2 orders holding the 2 units", orders, st)
		}
	})
}

// Two instances handle the same tickets at once (a redelivery racing the first delivery):
// no ticket yields two orders, and the units add up.
func TestATicketServedTwiceAtOnceMakesOneOrder(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, s orderpay.Store) {
		const tickets, units = 12, 8
		b := queuedSetup(t, s, units)
		other, err := order.New(order.Config{Store: s, Clock: b.clock})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		var ids []string
		for i := range tickets {
			ids = append(ids, take(t, b, fmt.Sprintf("buyer%d", i), 1, "").Ticket.ID)
		}
		msgs := ticketMessages(t, b)
		var wg sync.WaitGroup
		errs := make(chan error, 2*tickets)
		for _, svc := range []*order.Service{b.svc, other} {
			wg.Go(func() {
				for _, id := range ids {
					// A failure that may pass is the bus's to retry: do so.
					for try := 0; ; try++ {
						err := svc.HandleTicket(ctx, msgs[id])
						if err == nil {
							break
						}
						if try == 20 {
							errs <- err
							break
						}
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		seen := map[string]string{}
		ordered := 0
		for i, id := range ids {
			tk := ticketOf(t, b, id)
			switch tk.State {
			case orderpay.TicketOrdered:
				if prev, dup := seen[tk.OrderNo]; dup {
					t.Errorf("tickets %s and %s share order %s", prev, id, tk.OrderNo)
				}
				seen[tk.OrderNo] = id
				ordered++
				if i >= units {
					t.Errorf("ticket %d ordered: arrivals after the %d units should be sold out", i, units)
				}
			case orderpay.TicketSoldOut:
			default:
				t.Errorf("ticket %d is %s", i, tk.State)
			}
		}
		if st := stockOf(t, s, "flash"); ordered != units || st.Locked != units || st.Available+st.Locked+st.Sold != st.Total {
			t.Errorf("%d ordered, stock %+v: want %d orders holding %d units", ordered, st, units, units)
		}
	})
}

func TestWaitingTicketsEndSoldOutOrExpiredByTheSweeper(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, s orderpay.Store) {
		b := pacedSetup(t, s, 1)
		ctx := context.Background()
		first := take(t, b, "first", 1, "").Ticket.ID
		second := take(t, b, "second", 1, "").Ticket.ID
		// Nothing to end yet.
		if res, err := b.svc.SweepTickets(ctx); err != nil || res != (order.TicketSweep{}) {
			t.Fatalf("sweep with stock left: %+v, %v", res, err)
		}
		// The first takes the last unit: the second ends sold out at the next pass, before
		// its own message is handled.
		if err := b.svc.HandleTicket(ctx, ticketMessages(t, b)[first]); err != nil {
			t.Fatal(err)
		}
		if res, err := b.svc.SweepTickets(ctx); err != nil || res.SoldOut != 1 {
			t.Fatalf("sweep after the last unit: %+v, %v", res, err)
		}
		if tk := ticketOf(t, b, second); tk.State != orderpay.TicketSoldOut {
			t.Errorf("second: %s, want SOLD_OUT", tk.State)
		}
		// A sold-out SKU takes no more tickets.
		if _, err := b.svc.Place(ctx, order.CreateOrderRequest{BuyerID: "late", Items: []order.ItemRequest{{SKU: "flash", Qty: 1}}}); orderpay.ErrorCode(err) != orderpay.EOUTOFSTOCK {
			t.Errorf("a ticket of a sold-out SKU: %v, want EOUTOFSTOCK", err)
		}
	})
}

func TestATicketPastItsWaitExpires(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, s orderpay.Store) {
		b := pacedSetup(t, s, 5)
		ctx := context.Background()
		early := take(t, b, "early", 1, "").Ticket
		b.clock.Advance(30 * time.Second)
		late := take(t, b, "late", 1, "").Ticket
		b.clock.Advance(31 * time.Second) // early waited 61 s of its 60; late 31 s
		if res, err := b.svc.SweepTickets(ctx); err != nil || res.Expired != 1 {
			t.Fatalf("sweep: %+v, %v", res, err)
		}
		if tk := ticketOf(t, b, early.ID); tk.State != orderpay.TicketExpired {
			t.Errorf("early: %s, want EXPIRED", tk.State)
		}
		if tk := ticketOf(t, b, late.ID); tk.State != orderpay.TicketWaiting || tk.Position != 1 {
			t.Errorf("late: %s position %d, want WAITING first", tk.State, tk.Position)
		}
		// Its message, delivered late, makes no order; the other's does.
		msgs := ticketMessages(t, b)
		for _, id := range []string{early.ID, late.ID} {
			if err := b.svc.HandleTicket(ctx, msgs[id]); err != nil {
				t.Fatal(err)
			}
		}
		if tk := ticketOf(t, b, early.ID); tk.State != orderpay.TicketExpired || tk.OrderNo != "" {
			t.Errorf("early after its message: %+v", tk)
		}
		if tk := ticketOf(t, b, late.ID); tk.State != orderpay.TicketOrdered {
			t.Errorf("late after its message: %s, want ORDERED", tk.State)
		}
	})
}

// A ticket whose order the buyer's own standing refuses at its turn (blocked while it
// waited) ends REFUSED with the reason, and the queue moves on.
func TestATicketOfABuyerBlockedMeanwhileEndsRefused(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, s orderpay.Store) {
		b := pacedSetup(t, s, 5)
		ctx := context.Background()
		bad := take(t, b, "bad", 1, "").Ticket.ID
		good := take(t, b, "good", 1, "").Ticket.ID
		if err := s.InTx(ctx, func(tx orderpay.Tx) error {
			return tx.Block(ctx, orderpay.BlockEntry{Kind: orderpay.BlockBuyer, Value: "bad", Reason: "test", CreatedAt: now})
		}); err != nil {
			t.Fatal(err)
		}
		if err := b.svc.HandleTicket(ctx, ticketMessages(t, b)[good]); err != nil {
			t.Fatal(err)
		}
		if tk := ticketOf(t, b, bad); tk.State != orderpay.TicketRefused || tk.Reason == "" || tk.OrderNo != "" {
			t.Errorf("the blocked buyer's ticket: %+v, want REFUSED with a reason", tk)
		}
		if tk := ticketOf(t, b, good); tk.State != orderpay.TicketOrdered {
			t.Errorf("the next ticket: %s, want ORDERED", tk.State)
		}
	})
}

// Retention removes ended tickets once published messages go (never within their key's
// day), and never a waiting one.
func TestRetentionRemovesEndedTicketsOnly(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, s orderpay.Store) {
		b := pacedSetup(t, s, 5)
		ctx := context.Background()
		ended := take(t, b, "ended", 1, "k-ended").Ticket.ID
		waiting := take(t, b, "waiting", 1, "").Ticket.ID
		if err := b.svc.HandleTicket(ctx, ticketMessages(t, b)[ended]); err != nil {
			t.Fatal(err)
		}
		r := s.(orderpay.Retainer)
		// Within the day the ended ticket stays, even under a policy shorter than that.
		short := orderpay.RetentionPolicy{Logs: time.Hour, Published: time.Hour, RawBodies: time.Hour}
		if res, err := r.Retain(ctx, now.Add(2*time.Hour), short); err != nil || res.Tickets != 0 {
			t.Fatalf("within the key's day: %+v, %v", res, err)
		}
		if res, err := r.Retain(ctx, now.Add(8*24*time.Hour), orderpay.DefaultRetention); err != nil || res.Tickets != 1 {
			t.Fatalf("after a week: %+v, %v", res, err)
		}
		if _, err := b.svc.Ticket(ctx, ended); orderpay.ErrorCode(err) != orderpay.ENOTFOUND {
			t.Errorf("the ended ticket: %v, want it gone", err)
		}
		if tk := ticketOf(t, b, waiting); tk.State != orderpay.TicketWaiting {
			t.Errorf("the waiting ticket: %s", tk.State)
		}
	})
}

// A ticket's position falls as the queue ahead of it is served: at once when this instance
// served them, within a quarter second when another did.
func TestATicketsPositionFallsAsTheQueueIsServed(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, s orderpay.Store) {
		b := pacedSetup(t, s, 10)
		other, err := order.New(order.Config{Store: s, Clock: b.clock})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		var ids []string
		for i := range 5 {
			ids = append(ids, take(t, b, fmt.Sprintf("buyer%d", i), 1, "").Ticket.ID)
		}
		last := ids[4]
		if p := ticketOf(t, b, last).Position; p != 5 {
			t.Fatalf("the fifth arrival: position %d", p)
		}
		msgs := ticketMessages(t, b)
		if err := b.svc.HandleTicket(ctx, msgs[ids[1]]); err != nil { // serves the first two
			t.Fatal(err)
		}
		if p := ticketOf(t, b, last).Position; p != 3 {
			t.Errorf("after this instance served two: position %d, want 3", p)
		}
		if err := other.HandleTicket(ctx, msgs[ids[2]]); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(2 * time.Second)
		for ticketOf(t, b, last).Position != 2 {
			if time.Now().After(deadline) {
				t.Fatalf("after another instance served the third: position %d, want 2 within a quarter second", ticketOf(t, b, last).Position)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// Without a pace, one message serves the queue from its head and a batch beyond its ticket,
// a batch per transaction: in arrival order, each ticket's order in a savepoint of its own,
// so that a buyer blocked meanwhile is refused alone and the units go to the next arrivals.
func TestAMessageServesTheQueueInBatches(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, s orderpay.Store) {
		const tickets, units = 40, 35
		b := queuedSetup(t, s, units)
		ctx := context.Background()
		var ids []string
		for i := range tickets {
			ids = append(ids, take(t, b, fmt.Sprintf("buyer%d", i), 1, "").Ticket.ID)
		}
		if err := s.InTx(ctx, func(tx orderpay.Tx) error {
			return tx.Block(ctx, orderpay.BlockEntry{Kind: orderpay.BlockBuyer, Value: "buyer5", Reason: "test", CreatedAt: now})
		}); err != nil {
			t.Fatal(err)
		}
		msgs := ticketMessages(t, b)
		if err := b.svc.HandleTicket(ctx, msgs[ids[0]]); err != nil {
			t.Fatal(err)
		}
		// The first batch (32) is served; the rest by the last ticket's message.
		served := 0
		for _, id := range ids {
			if ticketOf(t, b, id).State != orderpay.TicketWaiting {
				served++
			}
		}
		if served != 32 {
			t.Errorf("the first message served %d tickets, want a batch of 32", served)
		}
		if err := b.svc.HandleTicket(ctx, msgs[ids[tickets-1]]); err != nil {
			t.Fatal(err)
		}
		orders := map[string]bool{}
		for i, id := range ids {
			tk := ticketOf(t, b, id)
			want := orderpay.TicketOrdered
			switch {
			case i == 5:
				want = orderpay.TicketRefused
			case i > units: // the refused one left its unit to the next arrival
				want = orderpay.TicketSoldOut
			}
			if tk.State != want {
				t.Errorf("arrival %d: %s, want %s", i, tk.State, want)
			}
			if tk.State == orderpay.TicketOrdered {
				if orders[tk.OrderNo] {
					t.Errorf("arrival %d shares order %s", i, tk.OrderNo)
				}
				orders[tk.OrderNo] = true
			}
		}
		if st := stockOf(t, s, "flash"); len(orders) != units || st.Locked != units || st.Available != 0 {
			t.Errorf("%d orders, stock %+v", len(orders), st)
		}
	})
}
