package orderpay_test

import (
	"strings"
	"testing"
	"time"

	"orderpay"
)

// The floors come from the configuration: the longest pay window plus the close grace for
// every period (what an order that can still be paid needs), and the refund retry window
// for the logs and raw bodies (what a refund on its way needs). The defaults sit on or
// above them; a period one nanosecond short is refused, naming the flag and both values.
func TestRetentionFloors(t *testing.T) {
	defaults := orderpay.RetentionNeeds{PayWindows: orderpay.DefaultPayWindows, CloseGrace: 30 * time.Second,
		RefundRetryFor: orderpay.DefaultRefundRetryPlan.For}
	live := 72*time.Hour + 30*time.Second
	if got := defaults.Floors(); got != (orderpay.RetentionPolicy{Logs: 7 * 24 * time.Hour, Published: live, RawBodies: 7 * 24 * time.Hour}) {
		t.Fatalf("floors of the defaults = %+v", got)
	}
	if err := orderpay.DefaultRetention.CheckFloors(defaults); err != nil {
		t.Fatalf("the default retention is below its floors: %v", err)
	}
	long := defaults
	long.PayWindows = orderpay.PayWindows{orderpay.ProductNormal: 240 * time.Hour, orderpay.ProductFast: time.Minute}
	long.RefundRetryFor = time.Hour
	f := long.Floors()
	if want := 240*time.Hour + 30*time.Second; f.Published != want || f.Logs != want || f.RawBodies != want {
		t.Fatalf("floors with a 240h window and a short retry window = %+v, want %s each", f, want)
	}
	for _, tc := range []struct {
		p    orderpay.RetentionPolicy
		flag string
	}{
		{orderpay.RetentionPolicy{Logs: f.Logs, Published: f.Published - 1, RawBodies: f.RawBodies}, "--retain-published"},
		{orderpay.RetentionPolicy{Logs: f.Logs - 1, Published: f.Published, RawBodies: f.RawBodies}, "--retain-logs"},
		{orderpay.RetentionPolicy{Logs: f.Logs, Published: f.Published, RawBodies: f.RawBodies - 1}, "--retain-raw"},
	} {
		err := tc.p.CheckFloors(long)
		if orderpay.ErrorCode(err) != orderpay.EINVALID || !strings.Contains(err.Error(), tc.flag+" ") ||
			!strings.Contains(err.Error(), "below its floor "+(240*time.Hour+30*time.Second).String()) {
			t.Errorf("%+v: %v, want %s refused naming its floor", tc.p, err, tc.flag)
		}
	}
	if err := f.CheckFloors(long); err != nil {
		t.Errorf("the floors themselves are refused: %v", err)
	}
}
