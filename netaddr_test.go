package orderpay_test

import (
	"net/netip"
	"slices"
	"testing"

	"orderpay"
)

func TestParseNetworks(t *testing.T) {
	got, err := orderpay.ParseNetworks(" 10.1.2.3/8, 127.0.0.1,::ffff:192.0.2.7 ,fd00::1/8,")
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("127.0.0.1/32"),
		netip.MustParsePrefix("192.0.2.7/32"), netip.MustParsePrefix("fd00::/8")}
	if !slices.Equal(got, want) {
		t.Errorf("ParseNetworks = %v, want %v", got, want)
	}
	for _, bad := range []string{"intranet", "10.0.0.0/33", "10.0.0.1-10.0.0.9"} {
		if _, err := orderpay.ParseNetworks(bad); err == nil {
			t.Errorf("ParseNetworks(%q) accepted it", bad)
		}
	}
}

func TestInNetworks(t *testing.T) {
	nets, err := orderpay.ParseNetworks("10.0.0.0/8,::1")
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]bool{"10.1.2.3": true, "::ffff:10.1.2.3": true, "::1": true,
		"11.0.0.1": false, "::2": false, "10.1.2.3:80": false, "": false} {
		if got := orderpay.InNetworks(nets, addr); got != want {
			t.Errorf("InNetworks(%q) = %v, want %v", addr, got, want)
		}
	}
}
