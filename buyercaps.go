package orderpay

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
)

// BuyerCap bounds what one buyer may hold unpaid of one kind of goods, so that no buyer
// can lock a product's stock away from the others until the pay deadline. 0 is no bound.
type BuyerCap struct {
	// PerOrder: units of one SKU in one order.
	PerOrder int64
	// UnpaidUnits: units of one SKU in the buyer's unpaid (PENDING_PAYMENT) orders, the
	// new order's included.
	UnpaidUnits int64
	// UnpaidOrders: the buyer's unpaid orders of this kind (an order's kind is its most
	// perishable item's, Order.ProductType), the new order included.
	UnpaidOrders int64
}

// BuyerCaps holds the cap of each product type; a type absent has no cap. A SKU may set
// its own PerOrder and UnpaidUnits (SKU.MaxPerOrder, SKU.MaxUnpaidPerBuyer).
type BuyerCaps map[ProductType]BuyerCap

// DefaultBuyerCaps are tighter the shorter the pay window: goods sold fast or on special
// offer are scarce, and a flash sale's buyer wants a few units, not a crate.
var DefaultBuyerCaps = BuyerCaps{
	ProductNormal:  {PerOrder: 200, UnpaidUnits: 500, UnpaidOrders: 20},
	ProductSpecial: {PerOrder: 10, UnpaidUnits: 20, UnpaidOrders: 5},
	ProductFast:    {PerOrder: 5, UnpaidUnits: 10, UnpaidOrders: 3},
}

// MaxBuyerCap bounds every cap, in flags and on SKUs alike.
const MaxBuyerCap = 1_000_000_000

// ParseCapsPerType reads "normal=200,special=10,fast=5" into one field of caps, which
// it returns changed (a copy): field picks the field. A type left out keeps its value; 0
// or "off" removes that bound.
func ParseCapsPerType(caps BuyerCaps, v string, field func(*BuyerCap) *int64) (BuyerCaps, error) {
	out := maps.Clone(caps)
	if out == nil {
		out = BuyerCaps{}
	}
	for part := range strings.SplitSeq(v, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.ParseInt(value, 10, 64)
		if value == "off" {
			n, err = 0, nil
		}
		if !ok || err != nil || n < 0 || n > MaxBuyerCap || !ProductType(name).Valid() {
			return nil, fmt.Errorf("%q is not <normal|special|fast>=<0 to %d, or off>", part, MaxBuyerCap)
		}
		c := out[ProductType(name)]
		*field(&c) = n
		out[ProductType(name)] = c
	}
	return out, nil
}

// String is the caps as the flags take them, one field at a time: field picks it.
func (c BuyerCaps) String(field func(*BuyerCap) *int64) string {
	var parts []string
	for _, t := range []ProductType{ProductNormal, ProductSpecial, ProductFast} {
		bc := c[t]
		parts = append(parts, fmt.Sprintf("%s=%d", t, *field(&bc)))
	}
	return strings.Join(parts, ",")
}

// UnpaidHoldings is what a buyer holds unpaid: the number of their PENDING_PAYMENT orders
// of each product type, and the units of some SKUs in them.
type UnpaidHoldings struct {
	Orders map[ProductType]int64
	Units  map[string]int64
}
