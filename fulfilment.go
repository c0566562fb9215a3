package orderpay

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Address is where an order's goods go. It can be changed until the first shipment leaves
// ("修改地址": only before shipping).
type Address struct {
	Name   string
	Phone  string
	Detail string // province, city, street and door, as the buyer wrote it
}

// Empty reports whether no address was given.
func (a Address) Empty() bool { return a == Address{} }

var phonePattern = regexp.MustCompile(`^\+?[0-9][0-9 -]{5,18}[0-9]$`)

// Validate checks an address a shipment can be sent to: a name, a phone of digits (with an
// optional leading + and spaces or dashes), and the place itself.
func (a Address) Validate() error {
	switch {
	case strings.TrimSpace(a.Name) == "" || len(a.Name) > 64:
		return Errorf(EINVALID, "address name must be 1-64 bytes")
	case !phonePattern.MatchString(a.Phone):
		return Errorf(EINVALID, "address phone %q is not a phone number", a.Phone)
	case strings.TrimSpace(a.Detail) == "" || len(a.Detail) > 256:
		return Errorf(EINVALID, "address detail must be 1-256 bytes")
	}
	return nil
}

// ShipmentStatus is the state of one parcel of an order (docs/design.md §4).
type ShipmentStatus string

const (
	ShipmentPending  ShipmentStatus = "PENDING"  // packed from a paid order, not yet handed to the carrier
	ShipmentShipped  ShipmentStatus = "SHIPPED"  // on its way; the receipt countdown runs
	ShipmentReceived ShipmentStatus = "RECEIVED" // confirmed by the buyer, or automatically at the deadline
	// ShipmentCancelled: every unit in it was refunded before it left.
	ShipmentCancelled ShipmentStatus = "CANCELLED"
)

// ShipmentEvent is something that happens to a shipment.
type ShipmentEvent string

const (
	ShipmentEventShip    ShipmentEvent = "ship"
	ShipmentEventExtend  ShipmentEvent = "extend" // the receipt deadline moves later
	ShipmentEventReceive ShipmentEvent = "receive"
	ShipmentEventCancel  ShipmentEvent = "cancel"
)

// ShipmentMachine is the shipment's transition table.
var ShipmentMachine = NewMachine("shipment", []Transition[ShipmentStatus, ShipmentEvent]{
	{ShipmentPending, ShipmentEventShip, ShipmentShipped},
	{ShipmentPending, ShipmentEventCancel, ShipmentCancelled},
	{ShipmentShipped, ShipmentEventExtend, ShipmentShipped},
	{ShipmentShipped, ShipmentEventReceive, ShipmentReceived},
})

// Receipt rules of "确认收货": the countdown starts when the goods ship and runs ten
// days; the buyer may extend it once; the merchant or the platform as often as they must.
const (
	ReceiptWindow         = 10 * 24 * time.Hour
	BuyerReceiptExtension = 3 * 24 * time.Hour
	// MaxReceiptExtension caps one extension by a merchant or the platform.
	MaxReceiptExtension = 30 * 24 * time.Hour
)

// Who may extend a receipt deadline.
const (
	ExtendByBuyer    = "buyer"
	ExtendByMerchant = "merchant"
	ExtendByPlatform = "platform"
)

// Shipment is one parcel: units of an order's lines from one merchant's warehouse, within
// the package limits.
type Shipment struct {
	No         string // order number + "S" + two digits
	OrderNo    string
	Seq        int
	MerchantID string
	Warehouse  string
	Status     ShipmentStatus
	WeightG    int64
	VolumeCm3  int64
	Carrier    string
	TrackingNo string
	// ReceiveBy is the receipt deadline once shipped.
	ReceiveBy time.Time
	// BuyerExtended is set once the buyer has used their one extension.
	BuyerExtended bool
	Extensions    int
	ShippedAt     time.Time
	ReceivedAt    time.Time
	ReceivedBy    string // "buyer" or "auto"
	CreatedAt     time.Time
	UpdatedAt     time.Time
	Items         []ShipmentItem
}

// ShipmentItem is some units of one order line in a parcel. Refunded counts those refunded
// before the parcel left; they are not sent.
type ShipmentItem struct {
	Line     int
	SKU      string
	Qty      int64
	Refunded int64
}

// Units is what the parcel still carries.
func (s *Shipment) Units() int64 {
	var n int64
	for _, it := range s.Items {
		n += it.Qty - it.Refunded
	}
	return n
}

// ReceiptSecondsLeft is how long the buyer has until receipt is confirmed for them.
func (s *Shipment) ReceiptSecondsLeft(now time.Time) int64 {
	if s.Status != ShipmentShipped || !now.Before(s.ReceiveBy) {
		return 0
	}
	return int64(s.ReceiveBy.Sub(now) / time.Second)
}

// ShipmentChange is one conditional transition of a shipment, with the fields it sets.
type ShipmentChange struct {
	No         string
	From       ShipmentStatus
	To         ShipmentStatus
	Event      ShipmentEvent
	At         time.Time
	Actor      string
	Reason     string
	Carrier    string    // ship
	TrackingNo string    // ship
	ReceiveBy  time.Time // ship, extend
	// Extension: the deadline it moves (ReceiveBy) must still be the stored one, so two
	// extensions racing cannot both apply on the same old deadline.
	PrevReceiveBy time.Time
	BuyerExtended bool   // extend by the buyer
	ReceivedBy    string // receive
}

// PackageLimits bound one parcel; zero means no limit. Seed 000 "拆单": orders split by
// merchant, by warehouse, and by the carrier's weight and size limits.
type PackageLimits struct {
	MaxWeightG   int64
	MaxVolumeCm3 int64
}

// DefaultPackageLimits are a common express parcel's: 20 kg and 60×50×40 cm.
var DefaultPackageLimits = PackageLimits{MaxWeightG: 20_000, MaxVolumeCm3: 120_000}

// Parcel is one planned shipment: which units of which lines go together.
type Parcel struct {
	MerchantID string
	Warehouse  string
	WeightG    int64
	VolumeCm3  int64
	Items      []ShipmentItem
}

// PlanShipments splits a paid order's lines into parcels: one group per merchant and
// warehouse, then units packed first-fit, heaviest first, into parcels within the limits. A
// unit that alone exceeds a limit travels in a parcel of its own (the carrier charges it as
// oversize; it cannot be split). skus gives each line's SKU. The plan is deterministic, so
// that a retried payment writes the same parcels.
func PlanShipments(items []OrderItem, skus map[string]*SKU, limits PackageLimits) ([]Parcel, error) {
	type unitKind struct {
		line           int
		sku            string
		weight, volume int64
		qty            int64
	}
	type group struct {
		merchant, warehouse string
		kinds               []unitKind
	}
	var groups []*group
	for _, it := range items {
		s := skus[it.SKU]
		if s == nil {
			return nil, Errorf(EINTERNAL, "plan shipments: no SKU %q", it.SKU)
		}
		wh := cmp.Or(s.Warehouse, DefaultWarehouse)
		i := slices.IndexFunc(groups, func(g *group) bool { return g.merchant == it.MerchantID && g.warehouse == wh })
		if i < 0 {
			groups = append(groups, &group{merchant: it.MerchantID, warehouse: wh})
			i = len(groups) - 1
		}
		groups[i].kinds = append(groups[i].kinds, unitKind{line: it.Line, sku: it.SKU, weight: s.WeightG, volume: s.VolumeCm3, qty: it.Qty})
	}
	slices.SortStableFunc(groups, func(a, b *group) int {
		return cmp.Or(cmp.Compare(a.merchant, b.merchant), cmp.Compare(a.warehouse, b.warehouse))
	})
	fits := func(p *Parcel, w, v int64) bool {
		return (limits.MaxWeightG == 0 || p.WeightG+w <= limits.MaxWeightG) &&
			(limits.MaxVolumeCm3 == 0 || p.VolumeCm3+v <= limits.MaxVolumeCm3)
	}
	var out []Parcel
	for _, g := range groups {
		// Heaviest (then bulkiest) units first: first-fit decreasing packs well and is simple
		// to reason about.
		slices.SortStableFunc(g.kinds, func(a, b unitKind) int {
			return cmp.Or(cmp.Compare(b.weight, a.weight), cmp.Compare(b.volume, a.volume), cmp.Compare(a.line, b.line))
		})
		var parcels []*Parcel
		for _, k := range g.kinds {
			for range k.qty {
				var into *Parcel
				for _, p := range parcels {
					if fits(p, k.weight, k.volume) {
						into = p
						break
					}
				}
				if into == nil {
					into = &Parcel{MerchantID: g.merchant, Warehouse: g.warehouse}
					parcels = append(parcels, into)
				}
				into.WeightG += k.weight
				into.VolumeCm3 += k.volume
				if n := len(into.Items); n > 0 && into.Items[n-1].Line == k.line {
					into.Items[n-1].Qty++
				} else {
					into.Items = append(into.Items, ShipmentItem{Line: k.line, SKU: k.sku, Qty: 1})
				}
			}
		}
		for _, p := range parcels {
			slices.SortFunc(p.Items, func(a, b ShipmentItem) int { return cmp.Compare(a.Line, b.Line) })
			out = append(out, *p)
		}
	}
	return out, nil
}

// DefaultWarehouse is the warehouse of a SKU that names none.
const DefaultWarehouse = "default"

// ShipmentNo is the number of an order's seq-th parcel (from 1).
func ShipmentNo(orderNo string, seq int) string { return fmt.Sprintf("%sS%02d", orderNo, seq) }

// FulfilmentReader reads parcels and after-sales requests. Each single-entity method returns
// ENOTFOUND for a missing one.
type FulfilmentReader interface {
	Shipment(ctx context.Context, no string) (*Shipment, error)
	Shipments(ctx context.Context, orderNo string) ([]Shipment, error) // by Seq, with items
	// DueShipments: SHIPPED parcels whose receipt deadline is before t, soonest first.
	DueShipments(ctx context.Context, before time.Time, limit int) ([]string, error)
	AfterSale(ctx context.Context, no string) (*AfterSale, error)
	AfterSales(ctx context.Context, orderNo string) ([]AfterSale, error) // by number, with items
	// AfterSalesInStatus lists requests in a status, oldest first (the review queue).
	AfterSalesInStatus(ctx context.Context, status AfterSaleStatus, limit int) ([]AfterSale, error)
}

// FulfilmentWriter changes parcels, after-sales requests and the delivery address, each
// change conditional like every other in Tx.
type FulfilmentWriter interface {
	CreateShipment(ctx context.Context, s *Shipment) error // ECONFLICT if its number exists
	TransitionShipment(ctx context.Context, c ShipmentChange) error
	// RefundShipmentUnits marks qty more units of a line of a PENDING parcel as refunded,
	// only while refunded stays within the line's qty there (ECONFLICT otherwise).
	RefundShipmentUnits(ctx context.Context, shipmentNo string, line int, qty int64, at time.Time) error
	// ChangeOrderAddress sets an order's address only while it is PENDING_PAYMENT or PAID,
	// that is before its first parcel ships (ECONFLICT otherwise), with a history line.
	ChangeOrderAddress(ctx context.Context, orderNo string, a Address, actor string, at time.Time) error
	CreateAfterSale(ctx context.Context, a *AfterSale) error // ECONFLICT if its number exists
	TransitionAfterSale(ctx context.Context, c AfterSaleChange) error
	// RestockSold moves qty of a SKU from sold back to available: units refunded before they
	// shipped, or returned; ECONFLICT if fewer are sold.
	RestockSold(ctx context.Context, sku string, qty int64) error
}
