package storetest

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"orderpay"
	"orderpay/sqlstore"
	"orderpay/webhook"
)

// machineFixture is one entity of a machine, stored, with what the test needs to move it:
// its table and key (to force a state and read the row back) and how the store is asked to
// move it from --event--> to.
type machineFixture struct {
	entity  string
	machine orderpay.TransitionChecker
	table   string
	where   string // the row's key condition, with args
	args    []any
	column  string // its state column
	// implicit: the store's method takes no from (and no event): it always moves from
	// this state (EndStockHold from HELD, a scheduled webhook attempt from PENDING), so the
	// pairs are tried with the row forced into each state.
	implicit string
	try      func(ctx context.Context, s orderpay.Store, from, event, to string) error
}

// testTransitionsOffTheTable asks the store, for every machine, for every transition its
// table does not have: each (from, event, to) of its states and events that is not a row,
// with the entity in state from. Each is refused with ECONFLICT and nothing is written (the
// row, its history and the outbox are as they were), and each refusal by the machine is
// counted. Where the store's method has a fixed from (a stock hold ends from HELD, a
// scheduled webhook attempt moves a PENDING delivery), every (from, to) pair the table does
// not have is tried with the row in state from.
func testTransitionsOffTheTable(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	st, ok := s.(*sqlstore.Store)
	if !ok {
		t.Fatalf("%T is not a *sqlstore.Store", s)
	}
	var logged SyncBuffer
	st.SetLogger(slog.New(slog.NewTextHandler(&logged, nil)))
	fixtures := machineFixtures(t, st)
	entities := map[string]bool{}
	for _, f := range fixtures {
		entities[f.entity] = true
	}
	for _, name := range []string{orderpay.EntityOrder, orderpay.EntityPayment, orderpay.EntityChannelOrder, orderpay.EntityRefund,
		orderpay.EntityAppPayment, orderpay.EntityShipment, orderpay.EntityAfterSale, orderpay.EntityStockHold, orderpay.EntityWebhookDelivery} {
		if !entities[name] {
			t.Fatalf("no fixture for the %s machine", name)
		}
	}
	total := 0
	for _, f := range fixtures {
		states, events := f.machine.StateNames(), f.machine.EventNames()
		if f.implicit != "" {
			events = []string{""} // the method's own event
		}
		refused := 0
		for _, from := range states {
			for _, to := range states {
				for _, event := range events {
					if f.implicit != "" && pairAllowed(f.machine, from, to) || f.implicit == "" && f.machine.PermitsNames(from, event, to) {
						continue
					}
					force(t, st, f, from)
					before := rowState(t, st, f)
					err := f.try(ctx, s, from, event, to)
					if code := orderpay.ErrorCode(err); code != orderpay.ECONFLICT {
						t.Errorf("%s %s --%s--> %s: %v (code %q), want ECONFLICT", f.entity, from, event, to, err, code)
					}
					if after := rowState(t, st, f); after != before {
						t.Errorf("%s %s --%s--> %s refused, but it wrote:\n before %s\n after  %s", f.entity, from, event, to, before, after)
					}
					// With a fixed from, a pair the machine has from that state is refused by
					// the store's condition on the row (it is not in that state), not by
					// the machine.
					if f.implicit == "" || !pairAllowed(f.machine, f.implicit, to) {
						refused++
					}
					total++
				}
			}
		}
		if got := st.RefusedTransitions()[f.entity]; got != int64(refused) {
			t.Errorf("%s: %d transitions counted refused, want %d", f.entity, got, refused)
		}
		if got := strings.Count(logged.String(), "level=ERROR msg=\"transition refused by its machine: nothing written\" entity="+f.entity+" "); got != refused {
			t.Errorf("%s: %d error lines of a refused transition, want %d", f.entity, got, refused)
		}
	}
	t.Logf("%d transitions off their machines' tables refused, nothing written", total)
}

// pairAllowed reports whether some event of m leads from from to to.
func pairAllowed(m orderpay.TransitionChecker, from, to string) bool {
	return slices.ContainsFunc(m.EventNames(), func(e string) bool { return m.PermitsNames(from, e, to) })
}

// force puts f's row in state, with no history, as if it had got there.
func force(t *testing.T, st *sqlstore.Store, f machineFixture, state string) {
	t.Helper()
	if _, err := st.DB().Exec(st.Rebind(`UPDATE `+f.table+` SET `+f.column+` = ? WHERE `+f.where), append([]any{state}, f.args...)...); err != nil {
		t.Fatal(err)
	}
}

// rowState is everything the store could have written about f: its row, column by column,
// its history and the outbox.
func rowState(t *testing.T, st *sqlstore.Store, f machineFixture) string {
	t.Helper()
	rows, err := st.DB().Query(st.Rebind(`SELECT * FROM `+f.table+` WHERE `+f.where), f.args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	out := ""
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		for i, c := range cols {
			if b, ok := vals[i].([]byte); ok {
				vals[i] = string(b)
			}
			out += fmt.Sprintf("%s=%v ", c, vals[i])
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var history, outbox int
	if err := st.DB().QueryRow(`SELECT (SELECT COUNT(*) FROM history), (SELECT COUNT(*) FROM outbox)`).Scan(&history, &outbox); err != nil {
		t.Fatal(err)
	}
	return out + fmt.Sprintf("| history %d, outbox %d", history, outbox)
}

// machineFixtures stores one entity of every machine.
func machineFixtures(t *testing.T, st *sqlstore.Store) []machineFixture {
	ctx := context.Background()
	at := t0.Add(time.Minute)
	newSKU(t, st, "mtea", 10)
	mustTx(t, st, func(tx orderpay.Tx) error {
		if err := tx.CreateOrder(ctx, newOrder("MO1", "mtea", 1)); err != nil {
			return err
		}
		paid := newOrder("MO2", "mtea", 1)
		paid.Status, paid.PaymentNo = orderpay.OrderPaid, "PMO2"
		if err := tx.CreateOrder(ctx, paid); err != nil {
			return err
		}
		if err := tx.CreateShipment(ctx, &orderpay.Shipment{No: orderpay.ShipmentNo("MO2", 1), OrderNo: "MO2", Seq: 1, MerchantID: "m1",
			Warehouse: orderpay.DefaultWarehouse, Status: orderpay.ShipmentPending, CreatedAt: t0, UpdatedAt: t0,
			Items: []orderpay.ShipmentItem{{Line: 1, SKU: "mtea", Qty: 1}}}); err != nil {
			return err
		}
		return tx.CreateAfterSale(ctx, &orderpay.AfterSale{No: "ASMO201", OrderNo: "MO2", Seq: 1, PaymentNo: "PMO2", BuyerID: "b1",
			Kind: orderpay.AfterSaleRefund, Status: orderpay.AfterSaleRequested, Amount: 1999, CreatedAt: t0, UpdatedAt: t0,
			Items: []orderpay.AfterSaleItem{{Line: 1, SKU: "mtea", Qty: 1, Amount: 1999}}})
	})
	paidAttempt(t, st, "MO2", 1999)
	mustTx(t, st, func(tx orderpay.Tx) error {
		return tx.CreateChannelRefund(ctx, &orderpay.ChannelRefund{OutRefundNo: "PMO2A01R1", OutTradeNo: "PMO2A01", PaymentNo: "PMO2",
			Channel: "alipay", Amount: 1999, Reason: "x", Status: orderpay.ChannelRefundPending, NextAt: t0, CreatedAt: t0, UpdatedAt: t0})
	})
	ap := paidAppPayment(t, st, "mapp", "AP00000000000000000001", 500)
	mustTx(t, st, func(tx orderpay.Tx) error {
		if err := tx.CreateSKU(ctx, &orderpay.SKU{SKU: "mheld", MerchantID: "m1", Title: "Held", Price: 1999, ProductType: orderpay.ProductNormal,
			StockPolicy: orderpay.StockReserve, ReserveMinutes: 15, CreatedAt: t0}, 10); err != nil {
			return err
		}
		if err := tx.LockStock(ctx, "mheld", 1); err != nil {
			return err
		}
		if err := tx.CreateOrder(ctx, newOrder("MO3", "mheld", 1)); err != nil {
			return err
		}
		return tx.CreateStockHold(ctx, &orderpay.StockHold{OrderNo: "MO3", Line: 1, SKU: "mheld", Qty: 1, HoldUntil: t0.Add(15 * time.Minute), CreatedAt: t0})
	})
	d := &webhook.Delivery{MsgID: "payment.succeeded:PMO2", Subscriber: "shop", Subject: orderpay.SubjectPaymentSucceeded,
		Payload: []byte(`{}`), OrderNo: "MO2", PaymentNo: "PMO2", Status: webhook.StatusPending, NextAt: t0, CreatedAt: t0, UpdatedAt: t0}
	if ok, err := st.CreateDelivery(ctx, d); err != nil || !ok {
		t.Fatalf("delivery: %v, %v", ok, err)
	}

	tx := func(s orderpay.Store, fn func(tx orderpay.Tx) error) error { return s.InTx(context.Background(), fn) }
	return []machineFixture{
		{entity: orderpay.EntityOrder, machine: orderpay.OrderMachine, table: "orders", where: "order_no = ?", args: []any{"MO1"}, column: "status",
			try: func(ctx context.Context, s orderpay.Store, from, event, to string) error {
				return tx(s, func(tx orderpay.Tx) error {
					return tx.TransitionOrder(ctx, orderpay.OrderChange{No: "MO1", From: orderpay.OrderStatus(from), To: orderpay.OrderStatus(to),
						Event: orderpay.OrderEvent(event), At: at, Actor: "test", PaymentNo: "PMO1"})
				})
			}},
		{entity: orderpay.EntityPayment, machine: orderpay.PaymentMachine, table: "payments", where: "payment_no = ?", args: []any{"PMO2"}, column: "status",
			try: func(ctx context.Context, s orderpay.Store, from, event, to string) error {
				return tx(s, func(tx orderpay.Tx) error {
					return tx.TransitionPayment(ctx, orderpay.PaymentChange{No: "PMO2", From: orderpay.PaymentStatus(from), To: orderpay.PaymentStatus(to),
						Event: orderpay.PaymentEvent(event), At: at, Actor: "test", PaidChannel: "alipay", PaidOutTradeNo: "PMO2A01", ReleasePrepay: true})
				})
			}},
		{entity: orderpay.EntityChannelOrder, machine: orderpay.ChannelOrderMachine, table: "channel_orders", where: "out_trade_no = ?",
			args: []any{"PMO2A01"}, column: "status",
			try: func(ctx context.Context, s orderpay.Store, from, event, to string) error {
				return tx(s, func(tx orderpay.Tx) error {
					return tx.TransitionChannelOrder(ctx, orderpay.ChannelOrderChange{OutTradeNo: "PMO2A01", From: orderpay.ChannelOrderStatus(from),
						To: orderpay.ChannelOrderStatus(to), Event: orderpay.ChannelOrderEvent(event), At: at, Actor: "test", Raw: "raw",
						TradeNo: "T1", PaidAt: at})
				})
			}},
		{entity: orderpay.EntityRefund, machine: orderpay.ChannelRefundMachine, table: "refunds", where: "out_refund_no = ?",
			args: []any{"PMO2A01R1"}, column: "status",
			try: func(ctx context.Context, s orderpay.Store, from, event, to string) error {
				return tx(s, func(tx orderpay.Tx) error {
					return tx.TransitionChannelRefund(ctx, orderpay.ChannelRefundChange{OutRefundNo: "PMO2A01R1",
						From: orderpay.ChannelRefundStatus(from), To: orderpay.ChannelRefundStatus(to), Event: orderpay.ChannelRefundEvent(event),
						At: at, Actor: "test", NextAt: at, Tries: 1, RetryingSince: at, Problem: "p", ResolvedBy: "op", ResolvedRef: "ref"})
				})
			}},
		{entity: orderpay.EntityAppPayment, machine: orderpay.AppPaymentMachine, table: "app_payments", where: "payment_no = ?",
			args: []any{ap.PaymentNo}, column: "status",
			try: func(ctx context.Context, s orderpay.Store, from, event, to string) error {
				return appTx(t, s, func(tx orderpay.AppTx) error {
					return tx.TransitionAppPayment(ctx, orderpay.AppPaymentChange{PaymentNo: ap.PaymentNo, From: orderpay.AppPaymentStatus(from),
						To: orderpay.AppPaymentStatus(to), Event: orderpay.AppPaymentEvent(event), At: at, Actor: "test"}, "closed")
				})
			}},
		{entity: orderpay.EntityShipment, machine: orderpay.ShipmentMachine, table: "shipments", where: "shipment_no = ?",
			args: []any{orderpay.ShipmentNo("MO2", 1)}, column: "status",
			try: func(ctx context.Context, s orderpay.Store, from, event, to string) error {
				return tx(s, func(tx orderpay.Tx) error {
					return tx.TransitionShipment(ctx, orderpay.ShipmentChange{No: orderpay.ShipmentNo("MO2", 1), From: orderpay.ShipmentStatus(from),
						To: orderpay.ShipmentStatus(to), Event: orderpay.ShipmentEvent(event), At: at, Actor: "test", Carrier: "SF", TrackingNo: "SF1",
						ReceiveBy: at.Add(orderpay.ReceiptWindow), ReceivedBy: "buyer"})
				})
			}},
		{entity: orderpay.EntityAfterSale, machine: orderpay.AfterSaleMachine, table: "after_sales", where: "after_sale_no = ?",
			args: []any{"ASMO201"}, column: "status",
			try: func(ctx context.Context, s orderpay.Store, from, event, to string) error {
				return tx(s, func(tx orderpay.Tx) error {
					return tx.TransitionAfterSale(ctx, orderpay.AfterSaleChange{No: "ASMO201", From: orderpay.AfterSaleStatus(from),
						To: orderpay.AfterSaleStatus(to), Event: orderpay.AfterSaleEvent(event), At: at, Actor: "test", ReturnCarrier: "SF",
						ReturnTrackingNo: "SF2"})
				})
			}},
		{entity: orderpay.EntityStockHold, machine: orderpay.HoldMachine, table: "stock_holds", where: "order_no = ? AND line = ?",
			args: []any{"MO3", 1}, column: "state", implicit: string(orderpay.HoldStanding),
			try: func(ctx context.Context, s orderpay.Store, _, _, to string) error {
				return tx(s, func(tx orderpay.Tx) error { return tx.EndStockHold(ctx, "MO3", 1, orderpay.HoldState(to), at) })
			}},
		{entity: orderpay.EntityWebhookDelivery, machine: webhook.DeliveryMachine, table: "webhook_deliveries", where: "id = ?",
			args: []any{d.ID}, column: "status", implicit: string(webhook.StatusPending),
			try: func(ctx context.Context, s orderpay.Store, _, _, to string) error {
				var attempts int
				if err := st.DB().QueryRow(st.Rebind(`SELECT attempts FROM webhook_deliveries WHERE id = ?`), d.ID).Scan(&attempts); err != nil {
					return err
				}
				moved, err := st.RecordAttempt(ctx, webhook.AttemptRecord{Attempt: webhook.Attempt{DeliveryID: d.ID, Kind: webhook.KindSchedule,
					HTTPStatus: 500, At: at}, Before: attempts, Status: webhook.Status(to), NextAt: at.Add(time.Minute)})
				if err == nil && !moved {
					// The store's condition (still PENDING) refused it: its answer to the
					// caller, who reads the delivery as moved on.
					return orderpay.Errorf(orderpay.ECONFLICT, "delivery %s moved on", strconv.FormatInt(d.ID, 10))
				}
				return err
			}},
	}
}

// SyncBuffer collects log output written from many goroutines, for a test to read.
type SyncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String is everything written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
