package orderpay

import (
	"runtime/debug"
	"strings"
)

// Version is this release of orderpay (CHANGELOG.md). A binary built from a tagged module
// reports the module's version instead.
const Version = "0.3.0"

// BuildInfo says which orderpay a binary is.
type BuildInfo struct {
	Version   string // the module's version, or Version+"-devel" when built from a checkout
	Revision  string // the VCS revision it was built from, "" if unknown
	Time      string // the revision's commit time (RFC 3339), "" if unknown
	Modified  bool   // built from a checkout with uncommitted changes
	GoVersion string
}

// Build reads the binary's build information.
func Build() BuildInfo {
	b := BuildInfo{Version: Version + "-devel"}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.GoVersion = info.GoVersion
	// A tagged module's version wins; the pseudo-version the toolchain makes up for a
	// checkout ("v0.0.0-<time>-<revision>") says no more than the revision below.
	if v := info.Main.Version; v != "" && v != "(devel)" && !strings.HasPrefix(v, "v0.0.0-") && !strings.Contains(v, "+dirty") {
		b.Version = strings.TrimPrefix(v, "v")
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// String is the version with the revision: "0.3.0-devel (1a2b3c4d5e6f, modified)".
func (b BuildInfo) String() string {
	s := b.Version
	if b.Revision != "" {
		rev := b.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if b.Modified {
			rev += ", modified"
		}
		s += " (" + rev + ")"
	}
	return s
}
