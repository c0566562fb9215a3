package orderpay_test

import (
	"testing"

	"orderpay"
)

func TestCountdownFollowsTheSeedsTwoFormats(t *testing.T) {
	const day, hour, minute = 86400, 3600, 60
	for left, want := range map[int64]string{
		3 * day:                        "03天00小时00分钟",
		3*day - 1:                      "02天23小时59分钟",
		10*day + 5*hour + 7*minute + 9: "10天05小时07分钟",
		day:                            "01天00小时00分钟",
		day - 1:                        "23小时59分钟59秒",
		15 * minute:                    "00小时15分钟00秒",
		1:                              "00小时00分钟01秒",
		0:                              "00小时00分钟00秒",
		-hour:                          "00小时00分钟00秒",
	} {
		if got := orderpay.Countdown(left); got != want {
			t.Errorf("Countdown(%d) = %q, want %q", left, got, want)
		}
	}
}
