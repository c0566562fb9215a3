package chaos

import (
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"orderpay"
)

// Over many seeds every drawn setting is within its range and valid for serve: the
// retention periods are exactly their floors (and the flags that carry them parse back to
// them), the retry plan validates, every stock policy is on a SKU, a reserve SKU holds its
// units 1 minute to its window; both ends of every range come up; the same seed draws the
// same settings and another seed others.
func TestDrawnSettingsStayInTheirRangesAtTheirFloors(t *testing.T) {
	within := func(seed uint64, what string, d, lo, hi time.Duration) {
		t.Helper()
		if d < lo || d > hi {
			t.Fatalf("seed %d: %s %s is outside [%s, %s]", seed, what, d, lo, hi)
		}
	}
	// Which ends of the ranges came up, over all the seeds.
	ends := map[string]bool{}
	end := func(what string, v, lo, hi int64) {
		if v == lo {
			ends[what+" low"] = true
		}
		if v == hi {
			ends[what+" high"] = true
		}
	}
	const seeds = 3000
	for seed := uint64(1); seed <= seeds; seed++ {
		s := DrawSettings(seed)
		if s.Source != SettingsDrawn {
			t.Fatalf("seed %d: source %q", seed, s.Source)
		}
		if got := slices.Sorted(maps.Keys(s.PayWindows)); !slices.Equal(got, []orderpay.ProductType{orderpay.ProductFast, orderpay.ProductNormal, orderpay.ProductSpecial}) {
			t.Fatalf("seed %d: windows for %v", seed, got)
		}
		for typ, w := range s.PayWindows {
			within(seed, string(typ)+" window", w, 4*time.Minute, 30*time.Minute)
			end(string(typ)+" window", int64(w), int64(4*time.Minute), int64(30*time.Minute))
		}
		within(seed, "close grace", s.CloseGrace, time.Second, 2*time.Minute)
		end("close grace", int64(s.CloseGrace), int64(time.Second), int64(2*time.Minute))

		plan := s.RefundRetry
		if err := plan.Validate(); err != nil {
			t.Fatalf("seed %d: retry plan %+v: %v", seed, plan, err)
		}
		if n := len(plan.Schedule); n < 1 || n > 4 {
			t.Fatalf("seed %d: %d waits in the retry schedule", seed, n)
		}
		end("retry waits", int64(len(plan.Schedule)), 1, 4)
		for _, d := range plan.Schedule {
			within(seed, "retry wait", d, 20*time.Second, 3*time.Minute)
			end("retry wait", int64(d), int64(20*time.Second), int64(3*time.Minute))
		}
		within(seed, "retry every", plan.Every, time.Minute, 5*time.Minute)
		end("retry every", int64(plan.Every), int64(time.Minute), int64(5*time.Minute))
		within(seed, "retry for", plan.For, plan.Schedule[0], 15*time.Minute)
		end("retry for", int64(plan.For), int64(plan.Schedule[0]), int64(15*time.Minute))

		if len(s.SKUs) != len(catalogue) {
			t.Fatalf("seed %d: %d SKUs, the catalogue has %d", seed, len(s.SKUs), len(catalogue))
		}
		policies := map[string]int{}
		for i, sku := range s.SKUs {
			if sku.Name != catalogue[i].name || sku.ProductType != catalogue[i].productType || sku.Price != catalogue[i].price {
				t.Fatalf("seed %d: SKU %d is %+v, not the catalogue's %s", seed, i, sku, catalogue[i].name)
			}
			if !orderpay.StockPolicy(sku.StockPolicy).Valid() {
				t.Fatalf("seed %d: %s has stock policy %q", seed, sku.Name, sku.StockPolicy)
			}
			policies[sku.StockPolicy]++
			if sku.StockPolicy != string(orderpay.StockReserve) {
				if sku.ReserveMinutes != 0 {
					t.Fatalf("seed %d: %s (%s) holds %d minutes", seed, sku.Name, sku.StockPolicy, sku.ReserveMinutes)
				}
				continue
			}
			most := int64(s.PayWindows[orderpay.ProductType(sku.ProductType)] / time.Minute)
			if sku.ReserveMinutes < 1 || sku.ReserveMinutes > most {
				t.Fatalf("seed %d: %s holds %d minutes, outside [1, %d] (its window %s)", seed, sku.Name, sku.ReserveMinutes, most,
					s.PayWindows[orderpay.ProductType(sku.ProductType)])
			}
			end("reserve minutes", sku.ReserveMinutes, 1, most)
		}
		for _, p := range stockPolicies {
			if policies[p] == 0 {
				t.Fatalf("seed %d: no SKU has stock policy %s: %+v", seed, p, s.SKUs)
			}
		}

		floors := s.Needs().Floors()
		if s.Retention != floors {
			t.Fatalf("seed %d: retention %+v, its floors are %+v", seed, s.Retention, floors)
		}
		if err := s.Retention.CheckFloors(s.Needs()); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if s.RetentionInterval != 30*time.Second {
			t.Fatalf("seed %d: retention interval %s", seed, s.RetentionInterval)
		}
		within(seed, "pos wait", s.PosWait, 20*time.Second, 35*time.Second)
		end("pos wait", int64(s.PosWait), int64(20*time.Second), int64(35*time.Second))
		checkServerArgs(t, seed, s)
	}
	for _, what := range []string{"fast window", "special window", "normal window", "close grace", "retry waits", "retry wait",
		"retry every", "retry for", "reserve minutes", "pos wait"} {
		for _, e := range []string{" low", " high"} {
			if !ends[what+e] {
				t.Errorf("over %d seeds no %s came at its%s end", seeds, what, e)
			}
		}
	}

	a, b := DrawSettings(42), DrawSettings(42)
	if !reflect.DeepEqual(a, b) || !reflect.DeepEqual(a.View(), b.View()) {
		t.Fatalf("the same seed drew\n%+v\n%+v", a, b)
	}
	if reflect.DeepEqual(a, DrawSettings(43)) {
		t.Fatal("the seed changes nothing")
	}
}

// checkServerArgs parses the flags that carry s as serve would and wants s back: every
// retention period exactly (so at least its floor).
func checkServerArgs(t *testing.T, seed uint64, s Settings) {
	t.Helper()
	args := s.ServerArgs()
	if len(args)%2 != 0 {
		t.Fatalf("seed %d: odd flags %v", seed, args)
	}
	flags := map[string]string{}
	for i := 0; i < len(args); i += 2 {
		flags[args[i]] = args[i+1]
	}
	duration := func(flag string) time.Duration {
		d, err := time.ParseDuration(flags[flag])
		if err != nil {
			t.Fatalf("seed %d: %s %q: %v", seed, flag, flags[flag], err)
		}
		return d
	}
	for flag, want := range map[string]time.Duration{"--close-grace": s.CloseGrace, "--refund-retry-every": s.RefundRetry.Every,
		"--refund-retry-for": s.RefundRetry.For, "--retain-logs": s.Retention.Logs, "--retain-published": s.Retention.Published,
		"--retain-raw": s.Retention.RawBodies, "--retention-interval": s.RetentionInterval, "--pos-wait": s.PosWait} {
		if got := duration(flag); got != want {
			t.Fatalf("seed %d: %s %q parses to %s, want %s", seed, flag, flags[flag], got, want)
		}
	}
	got := orderpay.RetentionPolicy{Logs: duration("--retain-logs"), Published: duration("--retain-published"), RawBodies: duration("--retain-raw")}
	if err := got.CheckFloors(s.Needs()); err != nil {
		t.Fatalf("seed %d: the flags as serve reads them: %v", seed, err)
	}
	schedule, err := orderpay.ParseDurations(flags["--refund-retry-schedule"])
	if err != nil || !slices.Equal(schedule, s.RefundRetry.Schedule) {
		t.Fatalf("seed %d: --refund-retry-schedule %q: %v %v", seed, flags["--refund-retry-schedule"], schedule, err)
	}
	windows := orderpay.PayWindows{}
	for _, part := range strings.Split(flags["--pay-windows"], ",") {
		name, value, _ := strings.Cut(part, "=")
		d, err := time.ParseDuration(value)
		if err != nil || !orderpay.ProductType(name).Valid() {
			t.Fatalf("seed %d: --pay-windows %q", seed, flags["--pay-windows"])
		}
		windows[orderpay.ProductType(name)] = d
	}
	if !maps.Equal(windows, s.PayWindows) {
		t.Fatalf("seed %d: --pay-windows %q, want %v", seed, flags["--pay-windows"], s.PayWindows)
	}
}

// The fixed settings are the ones every run had before: the usual windows, the close grace
// given, a 1, 2, 4 minute plan then every 4 minutes for 10, the catalogue's own policies;
// the retention periods at their floors.
func TestFixedSettingsAreTheUsualOnes(t *testing.T) {
	s := FixedSettings(30 * time.Second)
	if s.Source != SettingsFixed || !maps.Equal(s.PayWindows, orderpay.DefaultPayWindows) || s.CloseGrace != 30*time.Second {
		t.Fatalf("fixed settings %+v", s)
	}
	if got := s.RefundRetry.String() + " " + s.RefundRetry.Every.String() + " " + s.RefundRetry.For.String(); got != "1m0s,2m0s,4m0s 4m0s 10m0s" {
		t.Errorf("fixed retry plan %s", got)
	}
	for i, sku := range s.SKUs {
		if sku.StockPolicy != catalogue[i].stockPolicy || sku.ReserveMinutes != catalogue[i].reserveMinutes {
			t.Errorf("SKU %s: %s %d, want the catalogue's %s %d", sku.Name, sku.StockPolicy, sku.ReserveMinutes, catalogue[i].stockPolicy, catalogue[i].reserveMinutes)
		}
	}
	if s.Retention != s.Needs().Floors() || s.Retention.Published != 72*time.Hour+30*time.Second {
		t.Errorf("fixed retention %+v", s.Retention)
	}
	if s.PosWait != 35*time.Second {
		t.Errorf("fixed till's wait %s, want the server's default 35s", s.PosWait)
	}
	checkServerArgs(t, 0, s)
	if !reflect.DeepEqual(SettingsFor(Config{Settings: SettingsFixed, CloseGrace: 30 * time.Second, Seed: 9}), s) {
		t.Error("SettingsFor(fixed) is not FixedSettings")
	}
	if !reflect.DeepEqual(SettingsFor(Config{Settings: SettingsDrawn, Seed: 9}), DrawSettings(9)) {
		t.Error("SettingsFor(drawn) is not DrawSettings")
	}
}

// The report's view names every value passed to the server and every SKU's policy.
func TestSettingsViewShowsEveryValue(t *testing.T) {
	s := DrawSettings(5)
	v := s.View()
	text := strings.Join(v.lines(), "\n")
	for _, want := range []string{s.CloseGrace.String(), s.RefundRetry.String(), s.RefundRetry.Every.String(), s.RefundRetry.For.String(),
		s.Retention.Logs.String(), s.Retention.Published.String(), s.Retention.RawBodies.String(), s.RetentionInterval.String(),
		"--pos-wait, wall time, not compressed): " + s.PosWait.String()} {
		if !strings.Contains(text, want) {
			t.Errorf("the report's settings lack %s:\n%s", want, text)
		}
	}
	for typ, w := range s.PayWindows {
		if !strings.Contains(text, string(typ)+" "+w.String()) {
			t.Errorf("the report's settings lack the %s window %s:\n%s", typ, w, text)
		}
	}
	for _, sku := range s.SKUs {
		if !strings.Contains(text, sku.Name+" ("+sku.ProductType+") "+sku.StockPolicy) {
			t.Errorf("the report's settings lack %s's policy:\n%s", sku.Name, text)
		}
	}
	if !slices.Equal(v.ServerArgs, s.ServerArgs()) {
		t.Errorf("view's server args %v", v.ServerArgs)
	}
}

// The retention lines of the server's log are summed, whoever asked for the pass.
func TestLoggedRetentionSumsThePasses(t *testing.T) {
	path := t.TempDir() + "/serve.log"
	log := `{"time":"t","level":"INFO","msg":"retention pass","notification_log":3,"query_log":4,"outbox":10,"webhook_attempts":0,"webhook_bodies":0,"request_keys":0,"stock_holds":2,"raw_bodies":7}
{"time":"t","level":"INFO","msg":"order paid","order_no":"1"}
not json at all "retention pass"
{"time":"t","level":"INFO","msg":"retention pass","notification_log":1,"query_log":0,"outbox":5,"webhook_attempts":0,"webhook_bodies":0,"request_keys":1,"stock_holds":0,"raw_bodies":0}
`
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	passes, sum, err := loggedRetention(path)
	want := orderpay.RetentionResult{NotificationLog: 4, QueryLog: 4, Outbox: 15, StockHolds: 2, RawBodies: 7, RequestKeys: 1}
	if err != nil || passes != 2 || sum != want {
		t.Fatalf("got %d passes %+v %v; want 2 %+v", passes, sum, err, want)
	}
	if retentionTotal(sum) != 33 {
		t.Errorf("total %d", retentionTotal(sum))
	}
}
