package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// A scrape within SnapshotEvery of the last gather is answered with its page; one after it
// gathers again; scrapes that arrive at once share one gather.
func TestScrapesShareAGatherPerSecond(t *testing.T) {
	var gathers atomic.Int64
	counter := prometheus.NewCounter(prometheus.CounterOpts{Name: "orderpay_test_things_total", Help: "things"})
	reg := prometheus.NewRegistry()
	reg.MustRegister(counter)
	g := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		gathers.Add(1)
		time.Sleep(5 * time.Millisecond) // a gather takes a while: the concurrent scrapes meet it
		return reg.Gather()
	})
	now := time.Unix(1_800_000_000, 0)
	var clock sync.Mutex
	s := &snapshots{g: g, every: time.Second, now: func() time.Time { clock.Lock(); defer clock.Unlock(); return now }}
	scrape := func() string {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain") {
			t.Fatalf("scrape: %d %q", rec.Code, rec.Header().Get("Content-Type"))
		}
		b, _ := io.ReadAll(rec.Body)
		return string(b)
	}
	if page := scrape(); !strings.Contains(page, "orderpay_test_things_total 0") {
		t.Fatalf("first page:\n%s", page)
	}
	counter.Inc()
	clock.Lock()
	now = now.Add(999 * time.Millisecond)
	clock.Unlock()
	if page := scrape(); !strings.Contains(page, "orderpay_test_things_total 0") || gathers.Load() != 1 {
		t.Fatalf("a scrape within the second gathered again (%d gathers):\n%s", gathers.Load(), page)
	}
	clock.Lock()
	now = now.Add(time.Millisecond)
	clock.Unlock()
	var wg sync.WaitGroup
	pages := make([]string, 50)
	for i := range pages {
		wg.Go(func() { pages[i] = scrape() })
	}
	wg.Wait()
	for i, page := range pages {
		if !strings.Contains(page, "orderpay_test_things_total 1") {
			t.Fatalf("scrape %d after the second did not see the new count:\n%s", i, page)
		}
	}
	if n := gathers.Load(); n != 2 {
		t.Errorf("50 scrapes at once after the second made %d gathers in all, want 2", n)
	}
}
