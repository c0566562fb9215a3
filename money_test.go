package orderpay_test

import (
	"testing"

	"orderpay"
)

func TestFormatYuan(t *testing.T) {
	for fen, want := range map[int64]string{0: "0.00", 1: "0.01", 10: "0.10", 99: "0.99", 100: "1.00", 1234: "12.34",
		100_000_000_00: "100000000.00", -5: "-0.05", -1234: "-12.34"} {
		if got := orderpay.FormatYuan(fen); got != want {
			t.Errorf("FormatYuan(%d) = %q, want %q", fen, got, want)
		}
	}
}

func TestParseYuan(t *testing.T) {
	for s, want := range map[string]int64{"0": 0, "0.01": 1, "0.1": 10, "12": 1200, "12.3": 1230, "12.34": 1234,
		"100000000.00": 100_000_000_00, "007.05": 705} {
		got, err := orderpay.ParseYuan(s)
		if err != nil || got != want {
			t.Errorf("ParseYuan(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	// Anything that is not exactly a yuan amount must not be rounded into one.
	for _, s := range []string{"", ".5", "1.", "1.234", "-1.00", "+1", "1e3", " 1.00", "1.00 ", "1,00", "abc", "1.0a", "9999999999999.00"} {
		if got, err := orderpay.ParseYuan(s); orderpay.ErrorCode(err) != orderpay.EINVALID {
			t.Errorf("ParseYuan(%q) = %d, %v; want EINVALID", s, got, err)
		}
	}
}

func TestYuanRoundTrip(t *testing.T) {
	for _, fen := range []int64{0, 1, 9, 10, 11, 99, 100, 101, 1999, 123456789, orderpay.MaxChannelAmount} {
		got, err := orderpay.ParseYuan(orderpay.FormatYuan(fen))
		if err != nil || got != fen {
			t.Errorf("round trip of %d gave %d, %v", fen, got, err)
		}
	}
}
