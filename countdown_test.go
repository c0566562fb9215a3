package orderpay_test

import (
	"testing"

	"orderpay"
)

func TestCountdownShowsDaysOrAClock(t *testing.T) {
	const day, hour, minute = 86400, 3600, 60
	for left, want := range map[int64]string{
		3 * day:                        "03天00小时00分钟",
		3*day - 1:                      "02天23小时59分钟",
		10*day + 5*hour + 7*minute + 9: "10天05小时07分钟",
		day:                            "01天00小时00分钟",
		day - 1:                        "23:59:59",
		15 * minute:                    "00:15:00",
		1:                              "00:00:01",
		0:                              "00:00:00",
		-hour:                          "00:00:00",
	} {
		if got := orderpay.Countdown(left); got != want {
			t.Errorf("Countdown(%d) = %q, want %q", left, got, want)
		}
	}
}
