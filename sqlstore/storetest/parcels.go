package storetest

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"orderpay"
)

// A refund before shipping and the parcel's shipment race: the ship has updated the parcel
// and not committed when the refund takes units out of it. The refund must wait for the
// ship and then find the parcel gone (ECONFLICT), never refund units that travel to the
// buyer. On PostgreSQL under READ COMMITTED a check of the parcel's status in a subquery
// did neither: it read the old, unshipped row and the refund went through.
func testRefundRacingShipment(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	newSKU(t, s, "kettle", 5)
	o := newOrder("O-PARCEL", "kettle", 2)
	o.Status, o.PaymentNo = orderpay.OrderPaid, "PO-PARCEL"
	sh := &orderpay.Shipment{No: orderpay.ShipmentNo(o.No, 1), OrderNo: o.No, Seq: 1, MerchantID: "m1", Warehouse: orderpay.DefaultWarehouse,
		Status: orderpay.ShipmentPending, CreatedAt: t0, UpdatedAt: t0, Items: []orderpay.ShipmentItem{{Line: 1, SKU: "kettle", Qty: 2}}}
	mustTx(t, s, func(tx orderpay.Tx) error {
		if err := tx.CreateOrder(ctx, o); err != nil {
			return err
		}
		return tx.CreateShipment(ctx, sh)
	})

	shipped, commit, shipDone := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		shipDone <- s.InTx(ctx, func(tx orderpay.Tx) error {
			err := tx.TransitionShipment(ctx, orderpay.ShipmentChange{No: sh.No, From: orderpay.ShipmentPending, To: orderpay.ShipmentShipped,
				Event: orderpay.ShipmentEventShip, At: t0, Actor: "merchant", Carrier: "SF", TrackingNo: "SF1", ReceiveBy: t0.Add(orderpay.ReceiptWindow)})
			close(shipped)
			<-commit // the ship holds its commit
			return err
		})
	}()
	<-shipped
	refundDone := make(chan error, 1)
	go func() {
		refundDone <- s.InTx(ctx, func(tx orderpay.Tx) error { return tx.RefundShipmentUnits(ctx, sh.No, 1, 1, t0) })
	}()
	// Let the refund reach the parcel: it either finishes (the defect) or waits for the ship.
	var refundErr error
	finished := false
	wait := 200 * time.Millisecond // SQLite: the refund waits on the store's write lock
	if isPostgres(s) {
		wait = 3 * time.Second
	}
	for deadline := time.Now().Add(wait); !finished && time.Now().Before(deadline) && !waitingOnParcel(ctx, s); {
		select {
		case refundErr = <-refundDone:
			finished = true
		case <-time.After(20 * time.Millisecond):
		}
	}
	close(commit)
	if err := <-shipDone; err != nil {
		t.Fatal(err)
	}
	if !finished {
		refundErr = <-refundDone
	}
	wantCode(t, refundErr, orderpay.ECONFLICT)
	got, err := s.Shipment(ctx, sh.No)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != orderpay.ShipmentShipped || got.Items[0].Refunded != 0 {
		t.Fatalf("parcel %s with %d units refunded after the race, want SHIPPED with none", got.Status, got.Items[0].Refunded)
	}
}

// sqlStore is what a SQL store shows beyond orderpay.Store.
type sqlStore interface {
	Dialect() string
	DB() *sql.DB
}

func isPostgres(s orderpay.Store) bool {
	pg, ok := s.(sqlStore)
	return ok && pg.Dialect() == "postgres"
}

// waitingOnParcel reports whether, on PostgreSQL, a session waits on a row lock to update a
// parcel.
func waitingOnParcel(ctx context.Context, s orderpay.Store) bool {
	return waitingOn(ctx, s, "UPDATE shipments SET updated_at%")
}

// waitingOn reports whether, on PostgreSQL, a session waits on a lock in a statement that
// matches the LIKE pattern.
func waitingOn(ctx context.Context, s orderpay.Store, pattern string) bool {
	if !isPostgres(s) {
		return false
	}
	var n int
	err := s.(sqlStore).DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_stat_activity
		WHERE wait_event_type = 'Lock' AND datname = current_database() AND query LIKE $1`, pattern).Scan(&n)
	return err == nil && n > 0
}
