package chaos

import (
	"context"
	"testing"
)

// A small flash sale through a real server: exactly the units are sold, every other buyer
// is told the SKU is sold out, and the naive baseline beside it oversells.
func TestFlashSaleSellsExactlyTheUnitsAndTheNaiveBaselineOversells(t *testing.T) {
	t.Parallel()
	rep, err := FlashBench(context.Background(), FlashConfig{Buyers: 400, Units: 60, Buckets: 4, Binary: serverBinary(t)})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Pass() || rep.SoldOut != 340 {
		t.Fatalf("orderpay: %+v", rep)
	}
	if rep.NaiveSold+int(rep.NaiveLeft) <= rep.Units {
		t.Fatalf("the naive baseline sold %d and left %d of %d: no lost update, so it showed nothing", rep.NaiveSold, rep.NaiveLeft, rep.Units)
	}
}
