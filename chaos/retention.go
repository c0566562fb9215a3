package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"orderpay"
)

// Retention during a run: the server's retention periods sit at their floors (Settings),
// and its clock is compressed, so what retention removes (published outbox rows, ended
// stock holds, notification and query logs, raw channel bodies) becomes old enough within
// the run. While the load, the settle phases and the after-sales phase go on, crashes
// included, the harness asks for a retention pass (POST /admin/retention) about every
// second, besides the server's own pass every Settings.RetentionInterval, and counts what
// the passes removed: orders are paid, cancelled and refunded while what they wrote is
// deleted under them, at the shortest periods serve accepts.
//
// The auditor reads nothing retention deletes: the unpublished outbox rows only (I7, never
// deleted: only published rows go), the standing stock holds only (I4 and I6: only ended
// holds go), the notification records of the notifications table and the transitions of
// the history (both kept for ever; only their raw bodies go, which a violation's history
// then shows without), and the simulator's ledger, notifications and the bus's stream,
// which are no part of orderpay's database.

// retentionEvery is how often the harness asks for a retention pass (wall time).
const retentionEvery = time.Second

// RetentionStats is what the retention passes removed during a run.
type RetentionStats struct {
	// Passes counts the harness's passes that answered; Errors those that failed (mostly
	// while the server restarted after a crash), each tried again a second later.
	Passes int `json:"passes"`
	Errors int `json:"errors"`
	// Removed sums what the harness's passes removed.
	Removed orderpay.RetentionResult `json:"removed"`
	// LoggedPasses and LoggedRemoved are every pass the server logged as having removed
	// something, up to the audit (serve.log's "retention pass" lines): its own, every
	// --retention-interval, and the harness's. A pass cut short by a kill -9 is not logged.
	LoggedPasses  int                      `json:"logged_passes"`
	LoggedRemoved orderpay.RetentionResult `json:"logged_removed"`
}

// Retain asks the server for one retention pass now (POST /admin/retention) and returns
// what it removed.
func (c *Client) Retain(ctx context.Context) (orderpay.RetentionResult, error) {
	var res orderpay.RetentionResult
	err := c.Call(ctx, http.MethodPost, c.API+"/admin/retention", c.admin(), nil, &res)
	return res, err
}

// startRetention asks for a retention pass every retentionEvery until stop is called; stop
// waits for the pass under way and returns what the passes removed.
func (r *runner) startRetention(ctx context.Context) (stop func() RetentionStats) {
	ctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex
	var st RetentionStats
	done := make(chan struct{})
	go func() {
		defer close(done)
		for sleepCtx(ctx, retentionEvery) {
			res, err := r.client.Retain(ctx)
			if ctx.Err() != nil {
				return // the stop cancelled it
			}
			mu.Lock()
			if err != nil {
				st.Errors++
			} else {
				st.Passes++
				addRetention(&st.Removed, res)
			}
			mu.Unlock()
			if err != nil {
				r.stats.apiError("retention", err)
			}
		}
	}()
	return func() RetentionStats {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return st
	}
}

// addRetention adds what one pass removed to a sum.
func addRetention(sum *orderpay.RetentionResult, res orderpay.RetentionResult) {
	sum.NotificationLog += res.NotificationLog
	sum.QueryLog += res.QueryLog
	sum.Outbox += res.Outbox
	sum.WebhookAttempts += res.WebhookAttempts
	sum.WebhookBodies += res.WebhookBodies
	sum.RequestKeys += res.RequestKeys
	sum.StockHolds += res.StockHolds
	sum.Tickets += res.Tickets
	sum.RawBodies += res.RawBodies
}

// retentionTotal is every row a sum counts.
func retentionTotal(res orderpay.RetentionResult) int64 {
	return res.NotificationLog + res.QueryLog + res.Outbox + res.WebhookAttempts + res.WebhookBodies + res.RequestKeys +
		res.StockHolds + res.Tickets + res.RawBodies + res.ChartCounts
}

// describeRetention is a sum for the report's table, every kind named.
func describeRetention(res orderpay.RetentionResult) string {
	return fmt.Sprintf("%d rows: outbox %d, stock holds %d, tickets %d, notification log %d, query log %d, raw bodies %d, webhook attempts %d, webhook bodies %d, request keys %d, chart counts %d",
		retentionTotal(res), res.Outbox, res.StockHolds, res.Tickets, res.NotificationLog, res.QueryLog, res.RawBodies, res.WebhookAttempts,
		res.WebhookBodies, res.RequestKeys, res.ChartCounts)
}

// loggedRetention sums the "retention pass" lines of the server's log (JSON lines, one per
// pass that removed something, whoever asked for it).
func loggedRetention(path string) (passes int, sum orderpay.RetentionResult, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, sum, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.Contains(line, []byte(`"retention pass"`)) {
			continue
		}
		var entry struct {
			Msg string `json:"msg"`
			orderpay.RetentionResult
		}
		if json.Unmarshal(line, &entry) != nil || entry.Msg != "retention pass" {
			continue
		}
		passes++
		addRetention(&sum, entry.RetentionResult)
	}
	return passes, sum, sc.Err()
}
