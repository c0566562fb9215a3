package chaos

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"orderpay"
	"orderpay/natsbus"
	"orderpay/sqlstore/storetest"
)

// A queued SKU's queue is drained while the server is killed (kill -9), or while the NATS
// server it takes the tickets from is stopped and started again, on both engines: every
// ticket ends once, none yields two orders, none is lost, the orders go to the earliest
// arrivals, and the units add up.
func TestQueuedDrainSurvivesAKillAndABusRestart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a server per case and drains a queue under a kill or a bus restart")
	}
	for _, disruption := range []string{"kill", "bus"} {
		t.Run("sqlite-"+disruption, func(t *testing.T) {
			t.Parallel()
			drainDisrupted(t, "", disruption)
		})
		t.Run("postgres-"+disruption, func(t *testing.T) {
			t.Parallel()
			drainDisrupted(t, storetest.PostgresDSN(t), disruption)
		})
	}
}

func drainDisrupted(t *testing.T, db, disruption string) {
	const buyers, units, pace = 90, 60, 20 // the drain takes 3 s at its pace
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	dir := t.TempDir()
	ec := envConfig{Binary: serverBinary(t), DataDir: dir, Prefix: "orderpay-queue-" + disruption + "-", TimeScale: 1, LogLevel: "info"}
	ec.DB = db
	e, err := startEnv(ctx, ec)
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	defer func() {
		if t.Failed() {
			t.Logf("the server's errors (serve.log):\n%s", serverErrors(filepath.Join(dir, "serve.log")))
		}
	}()
	sku := "queued-" + e.runID
	err = e.client.Call(ctx, http.MethodPost, e.client.API+"/admin/skus", http.Header{"Authorization": {"Bearer " + e.client.AdminToken}},
		map[string]any{"sku": sku, "merchant_id": "m-chaos", "title": "Flash " + sku, "price": 4990, "stock": units, "stock_buckets": 4,
			"queued": true, "queue_pace": pace, "queue_wait_seconds": 120}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The burst: every buyer takes a ticket (retried under its key through the disruption).
	type ticket struct {
		ID    string `json:"ticket_id"`
		State string `json:"state"`
	}
	ids := make([]string, buyers)
	var wg sync.WaitGroup
	errs := make(chan error, buyers)
	for i := range buyers {
		wg.Go(func() {
			var tk ticket
			err := e.client.As(fmt.Sprintf("qb%d", i)).Call(ctx, http.MethodPost, e.client.API+"/v1/orders",
				http.Header{"Idempotency-Key": {fmt.Sprintf("q-%s-%d", e.runID, i)}},
				map[string]any{"items": []Item{{SKU: sku, Qty: 1}}}, &tk)
			if err == nil && tk.State != string(orderpay.TicketWaiting) && tk.State != string(orderpay.TicketOrdered) {
				err = fmt.Errorf("buyer %d: ticket %+v", i, tk)
			}
			ids[i] = tk.ID
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Disrupt mid-drain: once a sixth of the units are ordered.
	for {
		n := e.countTickets(ctx, t, ids, orderpay.TicketOrdered)
		if n >= units/6 {
			if n >= units {
				t.Fatalf("the queue drained before the %s: %d ordered", disruption, n)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the queue never started draining")
		}
		time.Sleep(20 * time.Millisecond)
	}
	switch disruption {
	case "kill":
		if _, err := e.server.Crash(ctx); err != nil {
			t.Fatal(err)
		}
	case "bus":
		addr := e.nats.Addr().String()
		e.nats.Shutdown()
		e.nats.WaitForShutdown()
		time.Sleep(time.Second)
		if e.nats, err = natsbus.StartEmbedded(filepath.Join(e.dir, "nats"), natsbus.ListenOn(addr)); err != nil {
			t.Fatal(err)
		}
	}
	// Every ticket ends, within the queue's pace and the restart.
	for e.countTickets(ctx, t, ids, orderpay.TicketWaiting) > 0 {
		if ctx.Err() != nil {
			t.Fatalf("tickets still waiting after the %s", disruption)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var all []*orderpay.Ticket
	for _, id := range ids {
		tk, err := e.store.Ticket(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, tk)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Seq < all[j].Seq })
	orders := map[string]string{}
	for i, tk := range all {
		want := orderpay.TicketOrdered
		if i >= units {
			want = orderpay.TicketSoldOut
		}
		if tk.State != want {
			t.Errorf("arrival %d (ticket %s): %s, want %s", i+1, tk.ID, tk.State, want)
		}
		if tk.State != orderpay.TicketOrdered {
			continue
		}
		if other, dup := orders[tk.OrderNo]; dup {
			t.Errorf("tickets %s and %s share order %s", other, tk.ID, tk.OrderNo)
		}
		orders[tk.OrderNo] = tk.ID
		o, err := e.store.Order(ctx, tk.OrderNo)
		if err != nil || o.BuyerID != tk.BuyerID || len(o.Items) != 1 || o.Items[0].SKU != sku || o.Items[0].Qty != 1 {
			t.Errorf("ticket %s's order %s: %+v, %v", tk.ID, tk.OrderNo, o, err)
		}
	}
	// The units add up: the orders of the tickets hold every unit, so no order of the SKU
	// exists without a ticket.
	st, err := e.store.Stock(ctx, sku)
	if err != nil {
		t.Fatal(err)
	}
	if st.Available != 0 || st.Locked+st.Sold != units || len(orders) != units || st.Available+st.Locked+st.Sold != st.Total {
		t.Errorf("stock %+v with %d ticket orders: want all %d units held by them", st, len(orders), units)
	}
}

// countTickets counts the tickets of ids in state.
func (e *env) countTickets(ctx context.Context, t *testing.T, ids []string, state orderpay.TicketState) int {
	t.Helper()
	n := 0
	for _, id := range ids {
		tk, err := e.store.Ticket(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if tk.State == state {
			n++
		}
	}
	return n
}
