package orderpay

import "testing"

func TestBarcodeChannelByPrefixAndLength(t *testing.T) {
	for _, tc := range []struct {
		code, want string
	}{
		{"134567890123456789", ChannelWechat},       // 18 digits, 13
		{"104567890123456789", ChannelWechat},       // 10
		{"154567890123456789", ChannelWechat},       // 15
		{"164567890123456789", ""},                  // 16: neither
		{"094567890123456789", ""},                  // 09: neither
		{"13456789012345678", ""},                   // 17 digits starting 13
		{"1345678901234567890", ""},                 // 19 digits starting 13
		{"2845678901234567", ChannelAlipay},         // 16 digits, 28
		{"254567890123456789", ChannelAlipay},       // 18 digits, 25
		{"304567890123456789012345", ChannelAlipay}, // 24 digits, 30
		{"3045678901234567890123456", ""},           // 25 digits
		{"284567890123456", ""},                     // 15 digits
		{"314567890123456789", ""},                  // 31
		{"624567890123456789", ""},                  // UnionPay 62
		{"28456789012345678a", ""},                  // a letter
		{"", ""},
	} {
		got, err := BarcodeChannel(tc.code)
		if got != tc.want {
			t.Errorf("BarcodeChannel(%q) = %q, %v; want %q", tc.code, got, err, tc.want)
		}
		if tc.want == "" && ErrorCode(err) != EINVALID {
			t.Errorf("BarcodeChannel(%q): error %v, want EINVALID", tc.code, err)
		}
	}
}

func TestEveryRefusalHasCashierWords(t *testing.T) {
	for _, r := range []BarcodeRefusal{RefusalBalance, RefusalPassword, RefusalCodeExpired, RefusalCodeUsed, RefusalCodeInvalid, RefusalRisk, RefusalOther} {
		if w := CashierWords[r]; w[0] == "" || w[1] == "" {
			t.Errorf("%s has no words for the cashier: %q", r, w)
		}
	}
}
