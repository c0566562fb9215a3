package main

import (
	"flag"
	"fmt"
	"os"

	"orderpay"
)

// buyerCapFlags are the flags of the buyer caps (orderpay.BuyerCaps), one per field, each
// per product type: "normal=200,special=10,fast=5", a type left out keeping its value.
var buyerCapFlags = []struct {
	name, help string
	field      func(*orderpay.BuyerCap) *int64
}{
	{"order-qty-cap", "units of one SKU in one order, per product type (a SKU's max_per_order comes first); more: 409 EQUANTITYCAP; 0 or off: none",
		func(c *orderpay.BuyerCap) *int64 { return &c.PerOrder }},
	{"unpaid-qty-cap", "units of one SKU one buyer may hold in unpaid orders, per product type (a SKU's max_unpaid_per_buyer comes first); more: 409 EUNPAIDCAP; 0 or off: none",
		func(c *orderpay.BuyerCap) *int64 { return &c.UnpaidUnits }},
	{"unpaid-orders-cap", "unpaid orders one buyer may hold, per product type (an order's type is its most perishable item's); more: 409 EUNPAIDORDERS; 0 or off: none",
		func(c *orderpay.BuyerCap) *int64 { return &c.UnpaidOrders }},
}

// buyerCapsFlags reads the buyer caps' environment variables into c and adds their flags
// to fs.
func (c *Config) buyerCapsFlags(fs *flag.FlagSet) error {
	for _, f := range buyerCapFlags {
		set := func(v string) error {
			caps, err := orderpay.ParseCapsPerType(c.BuyerCaps, v, f.field)
			if err != nil {
				return fmt.Errorf("--%s: %w", f.name, err)
			}
			c.BuyerCaps = caps
			return nil
		}
		env := envName(f.name)
		if v, ok := os.LookupEnv(env); ok {
			if err := set(v); err != nil {
				return fmt.Errorf("%s: %w", env, err)
			}
		}
		fs.Func(f.name, f.help+" (default "+orderpay.DefaultBuyerCaps.String(f.field)+") ["+env+"]", set)
	}
	return nil
}
