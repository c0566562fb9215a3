package storetest

import (
	"context"
	"reflect"
	"testing"
	"time"

	"orderpay"
)

// OrderPage reads what a buyer's page shows of an order, each part as the store's own
// read of it: the payment and its attempts while the order is pending, its parcels and
// requests once it has a payment number, and nothing of a missing order.
func testOrderPage(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	newSKU(t, s, "tea", 5)
	_, err := s.OrderPage(ctx, "nope")
	wantCode(t, err, orderpay.ENOTFOUND)

	o := newOrder("O1", "tea", 2)
	mustTx(t, s, func(tx orderpay.Tx) error { return tx.CreateOrder(ctx, o) })
	page, err := s.OrderPage(ctx, "O1")
	if err != nil {
		t.Fatal(err)
	}
	order, _ := s.Order(ctx, "O1")
	if !reflect.DeepEqual(page.Order, order) || page.Payment != nil || page.Attempts != nil || page.Parcels != nil || page.Sales != nil {
		t.Fatalf("the page of an order not asked to be paid = %+v; want the order (%+v) alone", page, order)
	}

	mustTx(t, s, func(tx orderpay.Tx) error {
		if err := tx.CreatePayment(ctx, &orderpay.Payment{No: "PO1", OrderNo: "O1", Amount: o.Payable, Status: orderpay.PaymentPaying,
			Subject: "Tea", PayDeadline: t0.Add(time.Hour), CreatedAt: t0, UpdatedAt: t0}); err != nil {
			return err
		}
		for i, channel := range []string{"alipay", "wechat"} {
			if err := tx.CreateChannelOrder(ctx, &orderpay.ChannelOrder{OutTradeNo: "PO1A0" + string(rune('1'+i)), PaymentNo: "PO1",
				Channel: channel, Seq: i + 1, Amount: o.Payable, Status: orderpay.ChannelOrderCreated, CreatedAt: t0, UpdatedAt: t0}); err != nil {
				return err
			}
		}
		return nil
	})
	page, err = s.OrderPage(ctx, "O1")
	if err != nil {
		t.Fatal(err)
	}
	payment, _ := s.PaymentByOrder(ctx, "O1")
	attempts, _ := s.ChannelOrders(ctx, "PO1")
	if !reflect.DeepEqual(page.Payment, payment) || !reflect.DeepEqual(page.Attempts, attempts) || len(attempts) != 2 ||
		page.Parcels != nil || page.Sales != nil {
		t.Fatalf("the page of a pending order = %+v; want its payment %+v and attempts %+v", page, payment, attempts)
	}

	mustTx(t, s, func(tx orderpay.Tx) error {
		if err := tx.TransitionOrder(ctx, orderpay.OrderChange{No: "O1", From: orderpay.OrderPendingPayment, To: orderpay.OrderPaid,
			Event: orderpay.OrderEventPay, At: t0, Actor: "payment-center", PaymentNo: "PO1"}); err != nil {
			return err
		}
		for seq := 1; seq <= 2; seq++ {
			if err := tx.CreateShipment(ctx, &orderpay.Shipment{No: orderpay.ShipmentNo("O1", seq), OrderNo: "O1", Seq: seq, MerchantID: "m1",
				Warehouse: orderpay.DefaultWarehouse, Status: orderpay.ShipmentPending, CreatedAt: t0, UpdatedAt: t0,
				Items: []orderpay.ShipmentItem{{Line: 1, SKU: "tea", Qty: 1}}}); err != nil {
				return err
			}
		}
		if err := tx.CreateAfterSale(ctx, &orderpay.AfterSale{No: "ASO101", OrderNo: "O1", Seq: 1, PaymentNo: "PO1", BuyerID: "b1",
			Kind: orderpay.AfterSaleRefund, Status: orderpay.AfterSaleRequested, Amount: 1999, CreatedAt: t0, UpdatedAt: t0,
			Items: []orderpay.AfterSaleItem{{Line: 1, SKU: "tea", Qty: 1, Amount: 1999}}}); err != nil {
			return err
		}
		return tx.CreateAfterSale(ctx, &orderpay.AfterSale{No: "ASO102", OrderNo: "O1", Seq: 2, PaymentNo: "PO1", BuyerID: "b1",
			Kind: orderpay.AfterSaleRefund, Status: orderpay.AfterSaleRequested, Amount: 1999, CreatedAt: t0, UpdatedAt: t0})
	})
	page, err = s.OrderPage(ctx, "O1")
	if err != nil {
		t.Fatal(err)
	}
	order, _ = s.Order(ctx, "O1")
	parcels, _ := s.Shipments(ctx, "O1")
	sales, _ := s.AfterSales(ctx, "O1")
	if !reflect.DeepEqual(page.Order, order) || order.Status != orderpay.OrderPaid || page.Payment != nil || page.Attempts != nil ||
		!reflect.DeepEqual(page.Parcels, parcels) || len(parcels) != 2 || !reflect.DeepEqual(page.Sales, sales) || len(sales) != 2 ||
		len(sales[0].Items) != 1 || len(sales[1].Items) != 0 {
		t.Fatalf("the page of a paid order = %+v; want the order %+v, its parcels %+v and requests %+v", page, order, parcels, sales)
	}
}
