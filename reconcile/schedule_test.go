package reconcile_test

import (
	"testing"
	"time"

	"orderpay"
	"orderpay/reconcile"
)

// The daily run is at a time of day in China time, and reconciles the day before it.
func TestNextDailyRun_ChinaTimeAndThePreviousDay(t *testing.T) {
	t.Parallel()
	at, err := reconcile.ParseDailyAt("10:30")
	if err != nil || at != 10*time.Hour+30*time.Minute {
		t.Fatalf("ParseDailyAt: %v, %v", at, err)
	}
	cst := orderpay.ChinaTime
	for _, tc := range []struct {
		now      time.Time
		next     time.Time
		billDate string
	}{
		// 02:00 UTC is 10:00 in China: today's run is still ahead.
		{time.Date(2026, 11, 21, 2, 0, 0, 0, time.UTC), time.Date(2026, 11, 21, 10, 30, 0, 0, cst), "2026-11-20"},
		// Exactly at the time: the next run is tomorrow's.
		{time.Date(2026, 11, 21, 10, 30, 0, 0, cst), time.Date(2026, 11, 22, 10, 30, 0, 0, cst), "2026-11-21"},
		// 20:00 UTC on the 21st is already the 22nd in China.
		{time.Date(2026, 11, 21, 20, 0, 0, 0, time.UTC), time.Date(2026, 11, 22, 10, 30, 0, 0, cst), "2026-11-21"},
		// Across a month end.
		{time.Date(2026, 11, 30, 23, 0, 0, 0, cst), time.Date(2026, 12, 1, 10, 30, 0, 0, cst), "2026-11-30"},
	} {
		next, date := reconcile.NextDailyRun(tc.now, at)
		if !next.Equal(tc.next) || date != tc.billDate {
			t.Errorf("NextDailyRun(%s) = %s, %s; want %s, %s", tc.now, next, date, tc.next, tc.billDate)
		}
	}
	for _, bad := range []string{"", "25:00", "10:3", "10h30", "10:30:00"} {
		if _, err := reconcile.ParseDailyAt(bad); orderpay.ErrorCode(err) != orderpay.EINVALID {
			t.Errorf("ParseDailyAt(%q): %v, want EINVALID", bad, err)
		}
	}
}
