package sqlstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"orderpay"
	"orderpay/sqlstore"
	"orderpay/sqlstore/storetest"
)

var snapshotEngines = []struct {
	name string
	open func(testing.TB) *sqlstore.Store
}{
	{"sqlite", storetest.OpenSQLite},
	{"postgres", storetest.OpenPostgres},
}

var snapT0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func snapshotTx(t *testing.T, s *sqlstore.Store, fn func(ctx context.Context, tx orderpay.Tx) error) {
	t.Helper()
	ctx := context.Background()
	if err := s.InTx(ctx, func(tx orderpay.Tx) error { return fn(ctx, tx) }); err != nil {
		t.Fatal(err)
	}
}

func snapshotTea(t *testing.T, s *sqlstore.Store, stock int64) {
	t.Helper()
	snapshotTx(t, s, func(ctx context.Context, tx orderpay.Tx) error {
		return tx.CreateSKU(ctx, &orderpay.SKU{SKU: "TEA", MerchantID: "m1", Title: "Tea", Price: 1000,
			ProductType: orderpay.ProductNormal, StockPolicy: orderpay.StockAtOrder, CreatedAt: snapT0}, stock)
	})
}

// Snapshot returns every row of every table the auditor reads, with all its columns.
func TestSnapshotReadsEveryTable(t *testing.T) {
	t.Parallel()
	for _, eng := range snapshotEngines {
		t.Run(eng.name, func(t *testing.T) {
			t.Parallel()
			s := eng.open(t)
			ctx := context.Background()
			snapshotTea(t, s, 10)
			// A second bucket, as a hot SKU will have: the per-SKU counts are the sums.
			if _, err := s.DB().Exec(`INSERT INTO stock (sku, bucket, available, locked, sold, total) VALUES ('TEA', 1, 5, 0, 0, 5)`); err != nil {
				t.Fatal(err)
			}
			snapshotTx(t, s, func(ctx context.Context, tx orderpay.Tx) error {
				if err := tx.LockStock(ctx, "TEA", 3); err != nil {
					return err
				}
				o := &orderpay.Order{No: "O1", BuyerID: "b1", Status: orderpay.OrderPendingPayment, Total: 3000, Payable: 3000,
					ProductType: orderpay.ProductNormal, PayDeadline: snapT0.Add(time.Hour), CreatedAt: snapT0, UpdatedAt: snapT0,
					Items: []orderpay.OrderItem{
						{Line: 1, SKU: "TEA", MerchantID: "m1", Title: "Tea", UnitPrice: 1000, Qty: 1, Amount: 1000, Payable: 1000},
						{Line: 2, SKU: "TEA", MerchantID: "m1", Title: "Tea", UnitPrice: 1000, Qty: 2, Amount: 2000, Payable: 2000},
					}}
				if err := tx.CreateOrder(ctx, o); err != nil {
					return err
				}
				if err := tx.CreatePayment(ctx, &orderpay.Payment{No: "P1", OrderNo: "O1", Amount: 3000, Status: orderpay.PaymentPaying,
					Subject: "Tea", PayDeadline: snapT0.Add(time.Hour), CreatedAt: snapT0, UpdatedAt: snapT0}); err != nil {
					return err
				}
				for i, tn := range []string{"T1", "T2"} {
					if err := tx.CreateChannelOrder(ctx, &orderpay.ChannelOrder{OutTradeNo: tn, PaymentNo: "P1", Channel: []string{"alipay", "wechat"}[i],
						Seq: i + 1, Amount: 3000, Status: orderpay.ChannelOrderPaying, Unknown: i == 1, QRCode: "qr-" + tn,
						QRExpiresAt: snapT0.Add(time.Hour), CreatedAt: snapT0, UpdatedAt: snapT0}); err != nil {
						return err
					}
				}
				if err := tx.CreateChannelRefund(ctx, &orderpay.ChannelRefund{OutRefundNo: "R1", OutTradeNo: "T2", PaymentNo: "P1", Channel: "wechat",
					Amount: 3000, Reason: orderpay.RefundReasonDuplicate, Status: orderpay.ChannelRefundPending, Unknown: true, Attempts: 2,
					NextAt: snapT0.Add(time.Minute), CreatedAt: snapT0, UpdatedAt: snapT0}); err != nil {
					return err
				}
				if err := tx.RecordNotification(ctx, orderpay.NotificationRecord{Channel: "alipay", NotifyID: "N1", OutTradeNo: "T1",
					Outcome: orderpay.OutcomePaid, Amount: 3000, Raw: "raw", ReceivedAt: snapT0}); err != nil {
					return err
				}
				return tx.Enqueue(ctx,
					orderpay.Message{ID: "order.created:O1", Subject: orderpay.SubjectOrderCreated, Payload: []byte(`{"order_no":"O1"}`), CreatedAt: snapT0},
					orderpay.Message{ID: "x:1", Subject: "x", Payload: []byte(`{}`), CreatedAt: snapT0})
			})
			if err := s.MarkPublished(ctx, []string{"x:1"}, snapT0); err != nil {
				t.Fatal(err)
			}

			snap, err := s.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want, err := s.Order(ctx, "O1")
			if err != nil {
				t.Fatal(err)
			}
			if len(snap.Orders) != 1 || fmt.Sprint(snap.Orders[0]) != fmt.Sprint(*want) {
				t.Errorf("Orders = %+v, want %+v", snap.Orders, *want)
			}
			p, _ := s.Payment(ctx, "P1")
			if len(snap.Payments) != 1 || snap.Payments[0] != *p {
				t.Errorf("Payments = %+v, want %+v", snap.Payments, *p)
			}
			cos, _ := s.ChannelOrders(ctx, "P1")
			if fmt.Sprint(snap.ChannelOrders) != fmt.Sprint(cos) || len(cos) != 2 || !snap.ChannelOrders[1].Unknown {
				t.Errorf("ChannelOrders = %+v, want %+v", snap.ChannelOrders, cos)
			}
			r, _ := s.ChannelRefund(ctx, "R1")
			if len(snap.Refunds) != 1 || snap.Refunds[0] != *r || !r.Unknown || r.Attempts != 2 {
				t.Errorf("Refunds = %+v, want %+v", snap.Refunds, r)
			}
			st, _ := s.Stock(ctx, "TEA")
			if len(snap.Stock) != 1 || snap.Stock[0] != *st || st.Total != 15 || st.Locked != 3 {
				t.Errorf("Stock = %+v, want %+v", snap.Stock, st)
			}
			if len(snap.StockRows) != 2 || snap.StockRows[0] != (sqlstore.SnapshotStockRow{SKU: "TEA", Bucket: 0, Available: 7, Locked: 3, Total: 10}) ||
				snap.StockRows[1] != (sqlstore.SnapshotStockRow{SKU: "TEA", Bucket: 1, Available: 5, Total: 5}) {
				t.Errorf("StockRows = %+v", snap.StockRows)
			}
			if len(snap.SKUs) != 1 || snap.SKUs[0].StockPolicy != orderpay.StockAtOrder {
				t.Errorf("SKUs = %+v", snap.SKUs)
			}
			if len(snap.Notifications) != 1 || snap.Notifications[0].NotifyID != "N1" || !snap.Notifications[0].ReceivedAt.Equal(snapT0) {
				t.Errorf("Notifications = %+v", snap.Notifications)
			}
			if snap.UnpublishedOutbox != 1 || len(snap.UnpublishedMessages) != 1 || snap.UnpublishedMessages[0].ID != "order.created:O1" {
				t.Errorf("UnpublishedOutbox = %d, %+v", snap.UnpublishedOutbox, snap.UnpublishedMessages)
			}
		})
	}
}

// A snapshot taken while buyers are ordering sees each order with its locked stock and its
// outbox message, or none of them: never an order without its stock.
func TestSnapshotIsConsistentDuringWrites(t *testing.T) {
	t.Parallel()
	for _, eng := range snapshotEngines {
		t.Run(eng.name, func(t *testing.T) {
			t.Parallel()
			s := eng.open(t)
			ctx := context.Background()
			snapshotTea(t, s, 1000)
			const orders = 40
			done := make(chan error, 1)
			go func() {
				for i := range orders {
					no := fmt.Sprintf("O%02d", i)
					err := s.InTx(ctx, func(tx orderpay.Tx) error {
						if err := tx.LockStock(ctx, "TEA", 2); err != nil {
							return err
						}
						if err := tx.CreateOrder(ctx, &orderpay.Order{No: no, BuyerID: "b", Status: orderpay.OrderPendingPayment, Total: 2000, Payable: 2000,
							ProductType: orderpay.ProductNormal, PayDeadline: snapT0, CreatedAt: snapT0, UpdatedAt: snapT0,
							Items: []orderpay.OrderItem{{Line: 1, SKU: "TEA", MerchantID: "m1", Title: "Tea", UnitPrice: 1000, Qty: 2, Amount: 2000, Payable: 2000}}}); err != nil {
							return err
						}
						return tx.Enqueue(ctx, orderpay.Message{ID: "order.created:" + no, Subject: orderpay.SubjectOrderCreated, Payload: []byte(`{}`), CreatedAt: snapT0})
					})
					if err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
			for finished := false; !finished; {
				select {
				case err := <-done:
					if err != nil {
						t.Fatal(err)
					}
					finished = true
				default:
				}
				snap, err := s.Snapshot(ctx)
				if err != nil {
					t.Fatal(err)
				}
				var held int64
				for _, o := range snap.Orders {
					for _, it := range o.Items {
						held += it.Qty
					}
				}
				if len(snap.Stock) != 1 || snap.Stock[0].Locked != held || snap.UnpublishedOutbox != len(snap.Orders) {
					t.Fatalf("torn snapshot: %d orders hold %d units, stock %+v, %d unpublished", len(snap.Orders), held, snap.Stock, snap.UnpublishedOutbox)
				}
				if finished && len(snap.Orders) != orders {
					t.Fatalf("final snapshot has %d orders, want %d", len(snap.Orders), orders)
				}
			}
		})
	}
}
