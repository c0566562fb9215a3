package sqlstore

import (
	"strings"
	"testing"
)

func TestPrefixRange(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		prefix, hi string
		ok         bool
	}{
		{"2026", "2027", true},
		{"20261128", "20261129", true},
		{"A_", "A`", true},
		{"%", "&", true},
		{`\`, "]", true},
		{"a\x7f", "a\u0080", true},
		{"é", "ê", true},
		{"\uD7FF", "\uE000", true},
		{"a\U0010FFFF", "b", true},
		{"\U0010FFFF\U0010FFFF", "", true},
		{"a\xff", "", false},
		{"a\x00", "", false},
	} {
		lo, hi, ok := prefixRange(c.prefix)
		if ok != c.ok || (ok && (lo != c.prefix || hi != c.hi)) {
			t.Errorf("prefixRange(%q) = %q, %q, %v; want %q, %q, %v", c.prefix, lo, hi, ok, c.prefix, c.hi, c.ok)
		}
		if !ok {
			continue
		}
		// Every string that begins with the prefix is in the range, byte-wise; the next one
		// above the range is not.
		for _, s := range []string{c.prefix, c.prefix + "0", c.prefix + "\U0010FFFF", c.prefix + "zzz"} {
			if !(s >= lo && (hi == "" || s < hi)) {
				t.Errorf("prefixRange(%q): %q is outside [%q, %q)", c.prefix, s, lo, hi)
			}
		}
		if hi != "" && strings.HasPrefix(hi, c.prefix) {
			t.Errorf("prefixRange(%q): hi %q begins with the prefix", c.prefix, hi)
		}
	}
}
