package sqlstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"orderpay"
)

// ---- parcels ----

const shipmentColumns = `shipment_no, order_no, seq, merchant_id, warehouse, status, weight_g, volume_cm3, carrier,
	tracking_no, receive_by, buyer_extended, extensions, shipped_at, received_at, received_by, created_at, updated_at`

func scanShipment(r scanner) (*orderpay.Shipment, error) {
	var s orderpay.Shipment
	var receiveBy, shipped, received, created, updated int64
	var buyerExtended int
	if err := r.Scan(&s.No, &s.OrderNo, &s.Seq, &s.MerchantID, &s.Warehouse, &s.Status, &s.WeightG, &s.VolumeCm3, &s.Carrier,
		&s.TrackingNo, &receiveBy, &buyerExtended, &s.Extensions, &shipped, &received, &s.ReceivedBy, &created, &updated); err != nil {
		return nil, err
	}
	s.BuyerExtended = buyerExtended != 0
	s.ReceiveBy, s.ShippedAt, s.ReceivedAt = orderpay.FromMillis(receiveBy), orderpay.FromMillis(shipped), orderpay.FromMillis(received)
	s.CreatedAt, s.UpdatedAt = orderpay.FromMillis(created), orderpay.FromMillis(updated)
	return &s, nil
}

func (q *queries) CreateShipment(ctx context.Context, s *orderpay.Shipment) error {
	items := make([][]any, len(s.Items))
	for i, it := range s.Items {
		items[i] = []any{s.No, it.Line, it.SKU, it.Qty, it.Refunded}
	}
	err := q.insertWithRows(ctx, `INSERT INTO shipments (shipment_no, order_no, seq, merchant_id, warehouse, status, weight_g, volume_cm3,
		created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, []any{
		s.No, s.OrderNo, s.Seq, s.MerchantID, s.Warehouse, string(s.Status), s.WeightG, s.VolumeCm3, ms(s.CreatedAt), ms(s.UpdatedAt)},
		`INSERT INTO shipment_items (shipment_no, line, sku, qty, refunded)`, items)
	if orderpay.ErrorCode(err) == orderpay.ECONFLICT {
		return orderpay.Errorf(orderpay.ECONFLICT, "shipment %q exists", s.No)
	}
	if err != nil {
		return err
	}
	return q.appendHistory(ctx, orderpay.HistoryEntry{Entity: orderpay.EntityShipment, EntityNo: s.No, To: string(s.Status),
		Event: "pack", Actor: "system", Reason: "order " + s.OrderNo + " paid", At: s.CreatedAt})
}

// shipmentItems fills the items of the given parcels (by number) in one query per order.
func (q *queries) shipmentItems(ctx context.Context, where string, arg string, into map[string]*orderpay.Shipment) error {
	return q.snapshotEach(ctx, `SELECT i.shipment_no, i.line, i.sku, i.qty, i.refunded FROM shipment_items i
		JOIN shipments s ON s.shipment_no = i.shipment_no WHERE `+where+` ORDER BY i.shipment_no, i.line`, func(r scanner) error {
		var no string
		var it orderpay.ShipmentItem
		if err := r.Scan(&no, &it.Line, &it.SKU, &it.Qty, &it.Refunded); err != nil {
			return err
		}
		if s := into[no]; s != nil {
			s.Items = append(s.Items, it)
		}
		return nil
	}, arg)
}

func (q *queries) Shipment(ctx context.Context, no string) (*orderpay.Shipment, error) {
	s, err := scanShipment(q.row(ctx, `SELECT `+shipmentColumns+` FROM shipments WHERE shipment_no = ?`, no))
	if err != nil {
		return nil, notFound(err, "shipment", no)
	}
	return s, q.shipmentItems(ctx, `s.shipment_no = ?`, no, map[string]*orderpay.Shipment{no: s})
}

// Shipments reads an order's parcels with their items in one statement (a paid order's
// every read shows them).
func (q *queries) Shipments(ctx context.Context, orderNo string) ([]orderpay.Shipment, error) {
	rd, parcels := shipmentsRead(orderNo)
	if err := q.run(ctx, rd); err != nil {
		return nil, err
	}
	return parcels(), nil
}

// shipmentsRead reads an order's parcels with their items: one row per item, or one with
// zeros for a parcel with none. Its result is the parcels by Seq.
func shipmentsRead(orderNo string) (read, func() []orderpay.Shipment) {
	var out []*orderpay.Shipment
	var it orderpay.ShipmentItem
	withItem := withColumns{extra: []any{&it.Line, &it.SKU, &it.Qty, &it.Refunded}}
	rd := read{query: `SELECT ` + qualified("s", shipmentColumns) + `, COALESCE(i.line, 0), COALESCE(i.sku, ''), COALESCE(i.qty, 0), COALESCE(i.refunded, 0)
		FROM shipments s LEFT JOIN shipment_items i ON i.shipment_no = s.shipment_no
		WHERE s.order_no = ? ORDER BY s.seq, i.line`, args: []any{orderNo},
		row: func(r scanner) error {
			withItem.r = r
			sh, err := scanShipment(&withItem)
			if err != nil {
				return err
			}
			if n := len(out); n == 0 || out[n-1].No != sh.No {
				out = append(out, sh)
			}
			if it.Line > 0 {
				last := out[len(out)-1]
				last.Items = append(last.Items, it)
			}
			return nil
		}}
	return rd, func() []orderpay.Shipment {
		res := make([]orderpay.Shipment, len(out))
		for i, s := range out {
			res[i] = *s
		}
		return res
	}
}

func qualified(table, cols string) string {
	list := strings.Split(cols, ",")
	for i, c := range list {
		list[i] = table + "." + strings.TrimSpace(c)
	}
	return strings.Join(list, ", ")
}

// withColumns is a scanner whose rows carry extra columns after those a scan function
// reads: they go into extra.
type withColumns struct {
	r     scanner
	extra []any
}

func (w *withColumns) Scan(dest ...any) error { return w.r.Scan(append(dest, w.extra...)...) }

// dueShipmentsQuery is the receipt auto-confirm sweeper's read, on shipments_receive_due.
const dueShipmentsQuery = `SELECT shipment_no FROM shipments WHERE status = 'SHIPPED' AND receive_by < ?
		ORDER BY receive_by LIMIT ?`

func (q *queries) DueShipments(ctx context.Context, before time.Time, limit int) ([]string, error) {
	var out []string
	err := q.snapshotEach(ctx, dueShipmentsQuery, func(r scanner) error {
		var no string
		err := r.Scan(&no)
		out = append(out, no)
		return err
	}, ms(before), limit)
	return out, err
}

func (q *queries) TransitionShipment(ctx context.Context, c orderpay.ShipmentChange) error {
	sets, args := []string{"updated_at = ?"}, []any{ms(c.At)}
	h := orderpay.HistoryEntry{Entity: orderpay.EntityShipment, EntityNo: c.No, Event: string(c.Event), Actor: c.Actor, Reason: c.Reason, At: c.At}
	if err := q.checked(orderpay.ShipmentMachine, h.Entity, c.No, string(c.From), h.Event, string(c.To)); err != nil {
		return err
	}
	switch c.Event {
	case orderpay.ShipmentEventShip:
		sets = append(sets, "carrier = ?", "tracking_no = ?", "shipped_at = ?", "receive_by = ?")
		args = append(args, c.Carrier, c.TrackingNo, ms(c.At), ms(c.ReceiveBy))
	case orderpay.ShipmentEventExtend:
		// Conditional on the deadline it extends as well as on the status: of two
		// extensions racing on the same deadline, only one applies; and the buyer's one
		// extension is taken only if it was not taken already.
		n, err := q.exec(ctx, `UPDATE shipments SET receive_by = ?, extensions = extensions + 1, buyer_extended = ?, updated_at = ?
			WHERE shipment_no = ? AND status = 'SHIPPED' AND receive_by = ? AND (? = 0 OR buyer_extended = 0)`,
			ms(c.ReceiveBy), boolInt(c.BuyerExtended), ms(c.At), c.No, ms(c.PrevReceiveBy), boolInt(c.BuyerExtended))
		if err != nil {
			return err
		}
		if n == 0 {
			if _, err := q.Shipment(ctx, c.No); err != nil {
				return err
			}
			return orderpay.Errorf(orderpay.ECONFLICT, "shipment %s was received, or its deadline moved, or the buyer's extension is used", c.No)
		}
		h.From, h.To = string(c.From), string(c.To)
		return q.appendHistory(ctx, h)
	case orderpay.ShipmentEventReceive:
		if !c.PrevReceiveBy.IsZero() {
			// The automatic confirmation: only on the deadline it found passed, so that an
			// extension committed meanwhile wins.
			n, err := q.exec(ctx, `UPDATE shipments SET status = ?, received_at = ?, received_by = ?, updated_at = ?
				WHERE shipment_no = ? AND status = ? AND receive_by = ?`,
				string(c.To), ms(c.At), c.ReceivedBy, ms(c.At), c.No, string(c.From), ms(c.PrevReceiveBy))
			if err != nil {
				return err
			}
			if n == 0 {
				return orderpay.Errorf(orderpay.ECONFLICT, "shipment %s was confirmed or extended meanwhile", c.No)
			}
			h.From, h.To = string(c.From), string(c.To)
			return q.appendHistory(ctx, h)
		}
		sets = append(sets, "received_at = ?", "received_by = ?")
		args = append(args, ms(c.At), c.ReceivedBy)
	}
	return q.transition(ctx, orderpay.ShipmentMachine, "shipments", "shipment_no", c.No, string(c.From), string(c.To), sets, args, h)
}

func (q *queries) RefundShipmentUnits(ctx context.Context, shipmentNo string, line int, qty int64, at time.Time) error {
	if qty <= 0 {
		return orderpay.Errorf(orderpay.EINVALID, "quantity must be positive")
	}
	// The parcel row first, on the condition that it is still unshipped: this takes its row
	// lock until the transaction ends. Under READ COMMITTED a check in a subquery neither
	// waits for a ship that has updated the parcel but not committed, nor stops one that
	// starts after it; this update waits for the first and makes the second wait, and a
	// parcel that shipped meanwhile matches no row.
	n, err := q.exec(ctx, `UPDATE shipments SET updated_at = ? WHERE shipment_no = ? AND status = 'PENDING'`, ms(at), shipmentNo)
	if err != nil {
		return err
	}
	if n == 0 {
		if _, err := q.Shipment(ctx, shipmentNo); err != nil {
			return err
		}
		return orderpay.Errorf(orderpay.ECONFLICT, "shipment %s has shipped or is cancelled: its units are returned, not refunded", shipmentNo)
	}
	n, err = q.exec(ctx, `UPDATE shipment_items SET refunded = refunded + ?
		WHERE shipment_no = ? AND line = ? AND refunded + ? <= qty`, qty, shipmentNo, line, qty)
	if err != nil {
		return err
	}
	if n == 0 {
		return orderpay.Errorf(orderpay.ECONFLICT, "shipment %s line %d: %d units are not left unshipped", shipmentNo, line, qty)
	}
	return nil
}

func (q *queries) ChangeOrderAddress(ctx context.Context, orderNo string, a orderpay.Address, actor string, at time.Time) error {
	n, err := q.exec(ctx, `UPDATE orders SET address_name = ?, address_phone = ?, address_detail = ?, updated_at = ?
		WHERE order_no = ? AND status IN ('PENDING_PAYMENT', 'PAID')`, a.Name, a.Phone, a.Detail, ms(at), orderNo)
	if err != nil {
		return err
	}
	if n == 0 {
		o, err := q.Order(ctx, orderNo)
		if err != nil {
			return err
		}
		return orderpay.Errorf(orderpay.ECONFLICT, "order %s is %s: the address can change only before shipping", orderNo, o.Status)
	}
	var status string
	if err := q.row(ctx, `SELECT status FROM orders WHERE order_no = ?`, orderNo).Scan(&status); err != nil {
		return err
	}
	return q.appendHistory(ctx, orderpay.HistoryEntry{Entity: orderpay.EntityOrder, EntityNo: orderNo, From: status, To: status,
		Event: "change_address", Actor: actor, At: at})
}

func (q *queries) RestockSold(ctx context.Context, sku string, qty int64) error {
	ok, err := q.moveStock(ctx, sku, qty, "sold", "available")
	if err != nil || ok {
		return err
	}
	return orderpay.Errorf(orderpay.ECONFLICT, "sku %q has fewer than %d sold units", sku, qty)
}

// ---- after-sales ----

const afterSaleColumns = `after_sale_no, order_no, seq, payment_no, buyer_id, kind, status, reason, amount, auto_review,
	return_carrier, return_tracking_no, created_at, updated_at, refunded_at`

func scanAfterSale(r scanner) (*orderpay.AfterSale, error) {
	var a orderpay.AfterSale
	var auto int
	var created, updated, refunded int64
	if err := r.Scan(&a.No, &a.OrderNo, &a.Seq, &a.PaymentNo, &a.BuyerID, &a.Kind, &a.Status, &a.Reason, &a.Amount, &auto,
		&a.ReturnCarrier, &a.ReturnTrackingNo, &created, &updated, &refunded); err != nil {
		return nil, err
	}
	a.AutoReview = auto != 0
	a.CreatedAt, a.UpdatedAt, a.RefundedAt = orderpay.FromMillis(created), orderpay.FromMillis(updated), orderpay.FromMillis(refunded)
	return &a, nil
}

func (q *queries) CreateAfterSale(ctx context.Context, a *orderpay.AfterSale) error {
	_, err := q.exec(ctx, `INSERT INTO after_sales (after_sale_no, order_no, seq, payment_no, buyer_id, kind, status, reason, amount,
		auto_review, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		a.No, a.OrderNo, a.Seq, a.PaymentNo, a.BuyerID, string(a.Kind), string(a.Status), a.Reason, a.Amount, boolInt(a.AutoReview),
		ms(a.CreatedAt), ms(a.UpdatedAt))
	if orderpay.ErrorCode(err) == orderpay.ECONFLICT {
		return orderpay.Errorf(orderpay.ECONFLICT, "after-sale %q exists", a.No)
	}
	if err != nil {
		return err
	}
	for _, it := range a.Items {
		if _, err := q.exec(ctx, `INSERT INTO after_sale_items (after_sale_no, line, sku, qty, amount) VALUES (?, ?, ?, ?, ?)`,
			a.No, it.Line, it.SKU, it.Qty, it.Amount); err != nil {
			return err
		}
	}
	return q.appendHistory(ctx, orderpay.HistoryEntry{Entity: orderpay.EntityAfterSale, EntityNo: a.No, To: string(a.Status),
		Event: "request", Actor: "buyer:" + a.BuyerID, Reason: a.Reason, At: a.CreatedAt})
}

// afterSales reads the requests where, then (if there are any) all their items in one
// more query.
func (q *queries) afterSales(ctx context.Context, where string, args ...any) ([]orderpay.AfterSale, error) {
	var sales salesRead
	if err := q.run(ctx, sales.requests(where, args...)); err != nil || len(sales.out) == 0 {
		return nil, err
	}
	nos := make([]string, len(sales.out))
	for i, a := range sales.out {
		nos[i] = a.No
	}
	err := q.run(ctx, sales.items(`SELECT after_sale_no, line, sku, qty, amount FROM after_sale_items
		WHERE after_sale_no IN (`+inList(len(nos))+`) ORDER BY after_sale_no, line`, stringArgs(nos)...))
	if err != nil {
		return nil, err
	}
	return sales.result(), nil
}

// salesRead gathers after-sales requests and then their items, from two reads.
type salesRead struct {
	out  []*orderpay.AfterSale
	byNo map[string]*orderpay.AfterSale
}

// afterSalesSelect reads after-sales requests: a condition follows.
const afterSalesSelect = `SELECT ` + afterSaleColumns + ` FROM after_sales WHERE `

// requests reads the requests where.
func (s *salesRead) requests(where string, args ...any) read {
	s.byNo = map[string]*orderpay.AfterSale{}
	return read{query: afterSalesSelect + where, args: args, row: func(r scanner) error {
		a, err := scanAfterSale(r)
		if err == nil {
			s.out, s.byNo[a.No] = append(s.out, a), a
		}
		return err
	}}
}

// items reads query's items (after_sale_no, line, sku, qty, amount) into the requests read
// before: query must read items of those requests only.
func (s *salesRead) items(query string, args ...any) read {
	return read{query: query, args: args, row: func(r scanner) error {
		var no string
		var it orderpay.AfterSaleItem
		if err := r.Scan(&no, &it.Line, &it.SKU, &it.Qty, &it.Amount); err != nil {
			return err
		}
		a := s.byNo[no]
		if a == nil {
			return fmt.Errorf("after-sale item of %q, a request not read", no)
		}
		a.Items = append(a.Items, it)
		return nil
	}}
}

func (s *salesRead) result() []orderpay.AfterSale {
	if len(s.out) == 0 {
		return nil
	}
	res := make([]orderpay.AfterSale, len(s.out))
	for i, a := range s.out {
		res[i] = *a
	}
	return res
}

func (q *queries) AfterSale(ctx context.Context, no string) (*orderpay.AfterSale, error) {
	as, err := q.afterSales(ctx, `after_sale_no = ?`, no)
	if err != nil {
		return nil, err
	}
	if len(as) == 0 {
		return nil, orderpay.Errorf(orderpay.ENOTFOUND, "after-sale %q not found", no)
	}
	return &as[0], nil
}

func (q *queries) AfterSales(ctx context.Context, orderNo string) ([]orderpay.AfterSale, error) {
	return q.afterSales(ctx, `order_no = ? ORDER BY seq`, orderNo)
}

func (q *queries) AfterSalesInStatus(ctx context.Context, status orderpay.AfterSaleStatus, limit int) ([]orderpay.AfterSale, error) {
	// On after_sales_by_status (status, created_at), whatever the status. The status is
	// written in, one of the machine's few known words, not bound: PostgreSQL then plans for
	// that status from its statistics, where a generic plan of status = $1 expects a share
	// of every request ever made (and the partial index of open requests cannot serve a
	// status given as a parameter).
	if !orderpay.AfterSaleMachine.Known(status) {
		return nil, nil // no request has it
	}
	return q.afterSales(ctx, afterSalesQueueWhere(status), limit)
}

// afterSalesQueueWhere is AfterSalesInStatus's condition and order for a known status; the
// page's size is its placeholder.
func afterSalesQueueWhere(status orderpay.AfterSaleStatus) string {
	return `status = '` + string(status) + `' ORDER BY created_at, after_sale_no LIMIT ?`
}

func (q *queries) TransitionAfterSale(ctx context.Context, c orderpay.AfterSaleChange) error {
	sets, args := []string{"updated_at = ?"}, []any{ms(c.At)}
	switch c.Event {
	case orderpay.AfterSaleEventApprove:
		sets, args = append(sets, "auto_review = ?"), append(args, boolInt(c.AutoReview))
	case orderpay.AfterSaleEventShipBack:
		sets, args = append(sets, "return_carrier = ?", "return_tracking_no = ?"), append(args, c.ReturnCarrier, c.ReturnTrackingNo)
	case orderpay.AfterSaleEventSucceed:
		sets, args = append(sets, "refunded_at = ?"), append(args, ms(c.At))
	}
	return q.transition(ctx, orderpay.AfterSaleMachine, "after_sales", "after_sale_no", c.No, string(c.From), string(c.To), sets, args,
		orderpay.HistoryEntry{Entity: orderpay.EntityAfterSale, EntityNo: c.No, Event: string(c.Event), Actor: c.Actor, Reason: c.Reason, At: c.At})
}

// snapshotFulfilment reads every parcel and after-sales request, with their items, into
// the auditor's snapshot.
func (q *queries) snapshotFulfilment(ctx context.Context, snap *Snapshot) error {
	byNo := map[string]int{}
	err := q.snapshotEach(ctx, `SELECT `+shipmentColumns+` FROM shipments ORDER BY shipment_no`, func(r scanner) error {
		s, err := scanShipment(r)
		if err == nil {
			byNo[s.No] = len(snap.Shipments)
			snap.Shipments = append(snap.Shipments, *s)
		}
		return err
	})
	if err != nil {
		return err
	}
	err = q.snapshotEach(ctx, `SELECT shipment_no, line, sku, qty, refunded FROM shipment_items ORDER BY shipment_no, line`, func(r scanner) error {
		var no string
		var it orderpay.ShipmentItem
		if err := r.Scan(&no, &it.Line, &it.SKU, &it.Qty, &it.Refunded); err != nil {
			return err
		}
		if i, ok := byNo[no]; ok {
			snap.Shipments[i].Items = append(snap.Shipments[i].Items, it)
		}
		return nil
	})
	if err != nil {
		return err
	}
	clear(byNo)
	err = q.snapshotEach(ctx, `SELECT `+afterSaleColumns+` FROM after_sales ORDER BY after_sale_no`, func(r scanner) error {
		a, err := scanAfterSale(r)
		if err == nil {
			byNo[a.No] = len(snap.AfterSales)
			snap.AfterSales = append(snap.AfterSales, *a)
		}
		return err
	})
	if err != nil {
		return err
	}
	return q.snapshotEach(ctx, `SELECT after_sale_no, line, sku, qty, amount FROM after_sale_items ORDER BY after_sale_no, line`, func(r scanner) error {
		var no string
		var it orderpay.AfterSaleItem
		if err := r.Scan(&no, &it.Line, &it.SKU, &it.Qty, &it.Amount); err != nil {
			return err
		}
		if i, ok := byNo[no]; ok {
			snap.AfterSales[i].Items = append(snap.AfterSales[i].Items, it)
		}
		return nil
	})
}
