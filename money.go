package orderpay

import (
	"strconv"
	"strings"
)

// Money is always an int64 count of fen (0.01 CNY). The channels speak yuan strings with two
// decimals ("12.34"); these two functions are the only place the two meet, and neither uses
// floating point.

// MaxChannelAmount is the largest single trade the channels accept: 100,000,000 yuan.
const MaxChannelAmount int64 = 100_000_000_00

// FormatYuan renders fen as a yuan string with exactly two decimals: 1234 → "12.34".
func FormatYuan(fen int64) string {
	sign := ""
	if fen < 0 {
		sign = "-"
		fen = -fen
	}
	frac := strconv.FormatInt(fen%100, 10)
	if len(frac) < 2 {
		frac = "0" + frac
	}
	return sign + strconv.FormatInt(fen/100, 10) + "." + frac
}

// ParseYuan parses a non-negative yuan amount with at most two decimals ("12", "12.3",
// "12.34") into fen. Anything else (signs, exponents, three decimals, spaces) is EINVALID,
// because a channel amount that does not parse exactly must never be rounded into a match.
func ParseYuan(s string) (int64, error) {
	whole, frac, hasDot := strings.Cut(s, ".")
	if whole == "" || len(whole) > 12 || (hasDot && (len(frac) == 0 || len(frac) > 2)) {
		return 0, Errorf(EINVALID, "amount %q is not a yuan amount with at most two decimals", s)
	}
	for _, part := range []string{whole, frac} {
		for _, c := range part {
			if c < '0' || c > '9' {
				return 0, Errorf(EINVALID, "amount %q is not a yuan amount with at most two decimals", s)
			}
		}
	}
	for len(frac) < 2 {
		frac += "0"
	}
	w, _ := strconv.ParseInt(whole, 10, 64)
	f, _ := strconv.ParseInt(frac, 10, 64)
	return w*100 + f, nil
}

// ParseSignedYuan is ParseYuan that also takes a leading minus sign ("-0.06"): a bill's fee
// or balance column may be negative.
func ParseSignedYuan(s string) (int64, error) {
	if rest, ok := strings.CutPrefix(s, "-"); ok {
		v, err := ParseYuan(rest)
		return -v, err
	}
	return ParseYuan(s)
}
