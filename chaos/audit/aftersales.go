package audit

import (
	"fmt"

	"orderpay"
)

// The invariants' view of after-sales: refunds before shipping and returns put
// units back on the shelf and send part of the money back, so I3 and I4 must count them.

// fulfilment indexes the snapshot's parcels and after-sales requests by order.
type fulfilment struct {
	parcels map[string][]*orderpay.Shipment
	sales   map[string][]*orderpay.AfterSale
}

func (w *world) indexFulfilment() {
	w.ful = fulfilment{parcels: map[string][]*orderpay.Shipment{}, sales: map[string][]*orderpay.AfterSale{}}
	for i := range w.snap.Shipments {
		s := &w.snap.Shipments[i]
		w.ful.parcels[s.OrderNo] = append(w.ful.parcels[s.OrderNo], s)
	}
	for i := range w.snap.AfterSales {
		a := &w.snap.AfterSales[i]
		w.ful.sales[a.OrderNo] = append(w.ful.sales[a.OrderNo], a)
	}
}

// restockedUnits is how many units of an item of a paid order are back in stock: those of
// after-sales requests that restocked them (a refund before shipping once approved, a
// return once its goods were received). I4 expects sold to be less by them.
func (w *world) restockedUnits(o *orderpay.Order, it orderpay.OrderItem) int64 {
	var n int64
	for _, a := range w.ful.sales[o.No] {
		if !a.Restocked() {
			continue
		}
		for _, ai := range a.Items {
			if ai.Line == it.Line {
				n += ai.Qty
			}
		}
	}
	return n
}

// checkAfterSales holds the after-sales side of I3 and I4 for every order:
//
//   - I3: a paid order's payment has refunded exactly the sum of its requests that
//     succeeded (the refunds of the paid attempt are after-sales and nothing else while the
//     order stays paid); no line gives back more than it was paid, and a line given back
//     whole gives back exactly its payable (RefundShare's promise, coupon share included);
//     a request's amount is the sum of its items.
//   - I4: a paid order's parcels carry each line's units exactly once; the units refunded out
//     of unshipped parcels are those of its approved refunds before shipping; no request
//     asks for more units of a line than were bought; and a cancelled order has no parcels
//     and no requests.
func (w *world) checkAfterSales() {
	for i := range w.snap.Orders {
		o := &w.snap.Orders[i]
		parcels, sales := w.ful.parcels[o.No], w.ful.sales[o.No]
		if !paidStatus(o.Status) {
			// A cancelled order was never packed nor after-sold (a payment it could not take
			// is refunded whole, not through after-sales). A pending one with parcels went
			// backwards, which I1 reports.
			if o.Status == orderpay.OrderCancelled && len(parcels)+len(sales) > 0 {
				w.add(Violation{Invariant: StockConserved, OrderNo: o.No,
					Detail: fmt.Sprintf("order is %s but has %d parcels and %d after-sales requests", o.Status, len(parcels), len(sales))})
			}
			continue
		}
		var succeeded int64
		asked := map[int]int64{}       // units in requests that count
		asMoney := map[int]int64{}     // money of those requests, per line
		refundedOut := map[int]int64{} // units of approved refunds before shipping
		for _, a := range sales {
			var sum int64
			for _, ai := range a.Items {
				sum += ai.Amount
				if a.Counts() {
					asked[ai.Line] += ai.Qty
					asMoney[ai.Line] += ai.Amount
				}
				if a.Kind == orderpay.AfterSaleRefund && a.Restocked() {
					refundedOut[ai.Line] += ai.Qty
				}
			}
			if sum != a.Amount {
				w.add(Violation{Invariant: MoneyConserved, OrderNo: o.No,
					Detail: fmt.Sprintf("after-sale %s asks %d fen but its items sum to %d", a.No, a.Amount, sum)})
			}
			if a.Status == orderpay.AfterSaleSucceeded {
				succeeded += a.Amount
			}
		}
		if p := w.paymentByOrder[o.No]; p != nil && p.Refunded != succeeded {
			w.add(Violation{Invariant: MoneyConserved, OrderNo: o.No, PaymentNo: p.No,
				Detail: fmt.Sprintf("the payment has refunded %d fen but the order's succeeded after-sales come to %d", p.Refunded, succeeded)})
		}
		inParcels, outOfParcels := map[int]int64{}, map[int]int64{}
		for _, p := range parcels {
			for _, pi := range p.Items {
				inParcels[pi.Line] += pi.Qty
				outOfParcels[pi.Line] += pi.Refunded
			}
		}
		for _, it := range o.Items {
			switch {
			case asked[it.Line] > it.Qty:
				w.add(Violation{Invariant: StockConserved, OrderNo: o.No, SKU: it.SKU,
					Detail: fmt.Sprintf("sku %s line %d: after-sales ask for %d of %d units", it.SKU, it.Line, asked[it.Line], it.Qty)})
			case asMoney[it.Line] > it.Payable || asked[it.Line] == it.Qty && asMoney[it.Line] != it.Payable:
				w.add(Violation{Invariant: MoneyConserved, OrderNo: o.No,
					Detail: fmt.Sprintf("line %d: after-sales for %d of %d units give back %d fen of its %d", it.Line, asked[it.Line], it.Qty, asMoney[it.Line], it.Payable)})
			}
			// An order marked paid with no payment behind it is I2's; it was never packed.
			if w.paymentByOrder[o.No] == nil {
				continue
			}
			if inParcels[it.Line] != it.Qty {
				w.add(Violation{Invariant: StockConserved, OrderNo: o.No, SKU: it.SKU,
					Detail: fmt.Sprintf("sku %s line %d: parcels carry %d units, the order has %d", it.SKU, it.Line, inParcels[it.Line], it.Qty)})
			}
			if outOfParcels[it.Line] != refundedOut[it.Line] {
				w.add(Violation{Invariant: StockConserved, OrderNo: o.No, SKU: it.SKU,
					Detail: fmt.Sprintf("sku %s line %d: %d units were taken out of unshipped parcels, approved refunds before shipping count %d", it.SKU, it.Line, outOfParcels[it.Line], refundedOut[it.Line])})
			}
		}
	}
}
