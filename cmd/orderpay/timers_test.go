package main

import "testing"

func TestParseBytesReadsGOMEMLIMITSizes(t *testing.T) {
	for in, want := range map[string]int64{"800MiB": 800 << 20, "1GiB": 1 << 30, "64KiB": 64 << 10, "4096": 4096, "12B": 12, "0": 0, "none": 0} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "MiB", "-1MiB", "1.5GiB", "800MB", "9999999999GiB"} {
		if got, err := parseBytes(bad); err == nil {
			t.Errorf("parseBytes(%q) = %d, want an error", bad, got)
		}
	}
}
