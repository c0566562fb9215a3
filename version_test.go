package orderpay_test

import (
	"strings"
	"testing"

	"orderpay"
)

func TestBuildNamesAVersion(t *testing.T) {
	b := orderpay.Build()
	if !strings.HasPrefix(b.Version, orderpay.Version) && !strings.HasPrefix(b.Version, "0.") && !strings.HasPrefix(b.Version, "1.") {
		t.Fatalf("version %q", b.Version)
	}
	if b.GoVersion == "" || !strings.HasPrefix(b.String(), b.Version) {
		t.Fatalf("build %+v, %q", b, b.String())
	}
	withRev := orderpay.BuildInfo{Version: "0.3.0", Revision: "0123456789abcdef0123", Modified: true}
	if got := withRev.String(); got != "0.3.0 (0123456789ab, modified)" {
		t.Fatalf("%q", got)
	}
}
