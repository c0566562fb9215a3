package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"orderpay"
	"orderpay/clocktest"
	"orderpay/httpapi"
	"orderpay/sqlstore"
	"orderpay/sqlstore/storetest"
)

// The console's charts count from the clock hour their window begins in, from the store's
// hourly counts: paid latencies into the bars and the percentiles (each the bound of its
// count's bucket), notifications by outcome; what the triggers added and the fold has not
// moved yet counts with what it has.
func TestChartsCountTheirHoursSQLite(t *testing.T) {
	t.Parallel()
	chartsCountTheirHours(t, storetest.OpenSQLite(t))
}

func TestChartsCountTheirHoursPostgres(t *testing.T) {
	t.Parallel()
	chartsCountTheirHours(t, storetest.OpenPostgres(t))
}

func chartsCountTheirHours(t *testing.T, store *sqlstore.Store) {
	ctx := context.Background()
	now := time.Date(2026, 11, 24, 10, 30, 0, 0, time.UTC)
	for i, n := range []struct {
		at       time.Time
		verified bool
		result   string
	}{
		{now.Add(-10 * time.Minute), true, orderpay.NotifyApplied},
		{now.Add(-5 * time.Minute), true, orderpay.NotifyApplied},
		{now.Add(-50 * time.Minute), false, orderpay.NotifyRejected}, // 9:40, in the window's first hour
		{now.Add(-3 * time.Hour), true, orderpay.NotifyIgnored},      // 7:30, before it
	} {
		if err := store.LogNotification(ctx, &orderpay.NotificationLogEntry{ReceivedAt: n.at, Channel: "alipay",
			OutTradeNo: fmt.Sprintf("N%d", i), Verified: n.verified, Result: n.result, Raw: "{}"}); err != nil {
			t.Fatal(err)
		}
	}
	paid := func(no string, opened time.Time, took time.Duration) {
		t.Helper()
		storetest.PaidAt(t, store, no, opened, opened.Add(took))
	}
	paid("O1", now.Add(-20*time.Minute), 300*time.Millisecond)  // the ≤1s bar, its bucket 300 ms
	paid("O2", now.Add(-55*time.Minute), 1500*time.Millisecond) // 9:35: the ≤2s bar, its bucket 1.5 s
	if _, err := store.FoldCounts(ctx); err != nil {
		t.Fatal(err)
	}
	paid("O3", now.Add(-2*time.Minute), 45*time.Second)  // the ≤1m bar, its bucket 50 s; not folded
	paid("O4", now.Add(-150*time.Minute), 3*time.Second) // 8:00, before the window
	paid("O5", now.Add(-3*time.Minute), 15*time.Minute)  // paid 12 min after now: the ≤30m… the >10m bar
	api := (&httpapi.Server{Ops: store, Audit: store, AdminToken: "admin", Clock: clocktest.New(now), Logger: slog.New(slog.DiscardHandler)}).Handler()

	type chart struct {
		Hours       int       `json:"hours"`
		Since       time.Time `json:"since"`
		Convergence struct {
			Samples int      `json:"samples"`
			P50     *float64 `json:"p50_seconds"`
			P99     *float64 `json:"p99_seconds"`
			Buckets []struct {
				Label string `json:"label"`
				Count int    `json:"count"`
			} `json:"buckets"`
		} `json:"convergence"`
		Notifications []struct {
			Verified bool   `json:"verified"`
			Result   string `json:"result"`
			Count    int    `json:"count"`
		} `json:"notifications"`
	}
	get := func(hours int) chart {
		t.Helper()
		r := httptest.NewRequest(http.MethodGet, fmt.Sprintf("/admin/charts?hours=%d", hours), nil)
		r.Header.Set("Authorization", "Bearer admin")
		w := httptest.NewRecorder()
		api.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("charts: status %d: %s", w.Code, w.Body)
		}
		var c chart
		if err := json.Unmarshal(w.Body.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	bars := func(c chart) map[string]int {
		out := map[string]int{}
		for _, b := range c.Convergence.Buckets {
			if b.Count > 0 {
				out[b.Label] = b.Count
			}
		}
		return out
	}
	outcomes := func(c chart) []string {
		var out []string
		for _, n := range c.Notifications {
			out = append(out, fmt.Sprintf("%v %s %d", n.Verified, n.Result, n.Count))
		}
		return out
	}

	c := get(1)
	if want := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC); !c.Since.Equal(want) || c.Hours != 1 {
		t.Fatalf("an hour's window begins at %v (%d hours); want the clock hour of 9:30, %v", c.Since, c.Hours, want)
	}
	// O5 was recorded paid at 10:42, after "now": the window has no end, as before.
	if got, want := bars(c), map[string]int{"≤1s": 1, "≤2s": 1, "≤1m0s": 1, ">10m0s": 1}; fmt.Sprint(got) != fmt.Sprint(want) || c.Convergence.Samples != 4 {
		t.Fatalf("an hour's bars %v of %d; want %v of 4", got, c.Convergence.Samples, want)
	}
	// Of four, the median is the third fastest (the one at rank ⌊0.5 × 4⌋ + 1), known as at
	// most its bucket's bound: 45 s, in the bucket of 50 s; the 99th percentile is the
	// slowest: 15 min, in the bucket of 1,000 s.
	if c.Convergence.P50 == nil || *c.Convergence.P50 != 50 || c.Convergence.P99 == nil || *c.Convergence.P99 != 1000 {
		t.Fatalf("p50 %v, p99 %v; want 50 s and 1000 s", ptr(c.Convergence.P50), ptr(c.Convergence.P99))
	}
	if got, want := outcomes(c), []string{"true applied 2", "false rejected 1"}; !slices.Equal(got, want) {
		t.Fatalf("an hour's notifications %v; want %v", got, want)
	}

	c = get(3)
	if want := time.Date(2026, 11, 24, 7, 0, 0, 0, time.UTC); !c.Since.Equal(want) {
		t.Fatalf("three hours' window begins at %v; want %v", c.Since, want)
	}
	if got, want := bars(c), map[string]int{"≤1s": 1, "≤2s": 1, "≤5s": 1, "≤1m0s": 1, ">10m0s": 1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("three hours' bars %v; want %v", got, want)
	}
	if got, want := outcomes(c), []string{"true applied 2", "true ignored 1", "false rejected 1"}; !slices.Equal(got, want) {
		t.Fatalf("three hours' notifications %v; want %v", got, want)
	}
	// Folded or not, the same counts.
	for {
		moved, err := store.FoldCounts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if moved == 0 {
			break
		}
	}
	if again := get(3); fmt.Sprint(bars(again), outcomes(again)) != fmt.Sprint(bars(c), outcomes(c)) {
		t.Fatalf("after the fold %v %v; before %v %v", bars(again), outcomes(again), bars(c), outcomes(c))
	}
}

func ptr(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}
