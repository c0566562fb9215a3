package order

import (
	"context"

	"orderpay"
)

// DemoCatalogue is what `orderpay serve` offers out of the box: one SKU of each product type,
// so that each pay deadline (3 days, 30 minutes, 15 minutes) can be tried.
var DemoCatalogue = []NewSKU{
	{SKU: "tea-longjing-250g", MerchantID: "m-hangzhou-tea", Title: "West Lake Longjing tea 250g", Price: 12800, Stock: 1000,
		ProductType: orderpay.ProductNormal, StockPolicy: orderpay.StockAtOrder},
	{SKU: "mooncake-giftbox", MerchantID: "m-suzhou-bakery", Title: "Mooncake gift box, special offer", Price: 8800, Stock: 500,
		ProductType: orderpay.ProductSpecial, StockPolicy: orderpay.StockAtOrder},
	{SKU: "lychee-1kg", MerchantID: "m-guangdong-fruit", Title: "Fresh lychee 1kg", Price: 3990, Stock: 2000,
		ProductType: orderpay.ProductFast, StockPolicy: orderpay.StockAtOrder},
}

// EnsureCatalogue creates the SKUs that do not exist yet and leaves existing ones (and
// their stock) alone, so that a restart does not reset what was sold. It returns how many
// it created.
func (s *Service) EnsureCatalogue(ctx context.Context, skus []NewSKU) (int, error) {
	created := 0
	for _, n := range skus {
		_, _, err := s.CreateSKU(ctx, n)
		switch orderpay.ErrorCode(err) {
		case "":
			created++
		case orderpay.ECONFLICT:
		default:
			return created, err
		}
	}
	return created, nil
}
