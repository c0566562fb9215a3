package sqlstore

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"orderpay"
)

// On PostgreSQL, the counts' two queues of deltas are vacuumed at every thousand dead rows,
// not at a fifth of the table; the tables counted keep autovacuum's defaults (migration
// 0036 resets what 0035 set on the two the charts read before).
func TestCountQueuesAreVacuumedAfterAFixedNumberOfRows(t *testing.T) {
	t.Parallel()
	s := openEngine(t, "postgres")
	ctx := context.Background()
	options := func(table string) []string {
		t.Helper()
		var opts []string
		rows, err := s.db.QueryContext(ctx, `SELECT unnest(reloptions) FROM pg_class
			WHERE relname = $1 AND relnamespace = current_schema()::regnamespace`, table)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var o string
			if err := rows.Scan(&o); err != nil {
				t.Fatal(err)
			}
			opts = append(opts, o)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		slices.Sort(opts)
		return opts
	}
	want := []string{"autovacuum_vacuum_scale_factor=0", "autovacuum_vacuum_threshold=1000"}
	for _, table := range []string{"status_count_deltas", "chart_count_deltas"} {
		if got := options(table); !slices.Equal(got, want) {
			t.Errorf("%s: storage parameters %q, want %q", table, got, want)
		}
	}
	for _, table := range []string{"payments", "notification_log", "orders"} {
		if got := options(table); len(got) != 0 {
			t.Errorf("%s: storage parameters %q, want none", table, got)
		}
	}
}

// The charts read none of the tables they count: with payments and the notification log
// renamed away, they still count what was paid and logged (a chart that read them would
// fail, no such table), folded or not.
func TestChartsReadNoCountedTable(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			ctx := context.Background()
			s := openEngine(t, engine)
			at := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
			for i := range 3 {
				opened := at.Add(time.Duration(i) * time.Minute)
				if err := s.InTx(ctx, func(tx orderpay.Tx) error {
					no := "P" + string(rune('1'+i))
					if err := tx.CreatePayment(ctx, &orderpay.Payment{No: no, OrderNo: "O" + no, Amount: 100, Status: orderpay.PaymentPaying,
						Subject: "x", PayDeadline: opened.Add(time.Hour), CreatedAt: opened, UpdatedAt: opened}); err != nil {
						return err
					}
					if err := tx.CreateChannelOrder(ctx, &orderpay.ChannelOrder{OutTradeNo: no + "A01", PaymentNo: no, Channel: "alipay", Seq: 1,
						Amount: 100, Status: orderpay.ChannelOrderSuccess, CreatedAt: opened, UpdatedAt: opened}); err != nil {
						return err
					}
					if err := tx.(*queries).LogNotification(ctx, &orderpay.NotificationLogEntry{ReceivedAt: opened.Add(2 * time.Second), Channel: "alipay",
						OutTradeNo: no + "A01", Verified: true, Result: orderpay.NotifyApplied, Raw: "{}"}); err != nil {
						return err
					}
					return tx.TransitionPayment(ctx, orderpay.PaymentChange{No: no, From: orderpay.PaymentPaying, To: orderpay.PaymentSuccess,
						Event: orderpay.PaymentEventSucceed, At: opened.Add(2 * time.Second), Actor: "t", PaidChannel: "alipay", PaidOutTradeNo: no + "A01"})
				}); err != nil {
					t.Fatal(err)
				}
				if i == 1 {
					if _, err := s.FoldCounts(ctx); err != nil {
						t.Fatal(err)
					}
				}
			}
			for _, table := range []string{"payments", "notification_log"} {
				if _, err := s.db.ExecContext(ctx, `ALTER TABLE `+table+` RENAME TO away_`+table); err != nil {
					t.Fatal(err)
				}
			}
			lat, err := s.PaidLatencyCounts(ctx, at)
			if want := []orderpay.LatencyCount{{UpTo: 2 * time.Second, Count: 3}}; err != nil || !slices.Equal(lat, want) {
				t.Errorf("paid latencies %v, %v; want %v", lat, err, want)
			}
			outcomes, err := s.NotificationOutcomes(ctx, at)
			if err != nil || len(outcomes) != 1 || outcomes[0] != (orderpay.NotificationOutcomeCount{Verified: true, Result: orderpay.NotifyApplied, Count: 3}) {
				t.Errorf("notification outcomes %+v, %v; want three verified and applied", outcomes, err)
			}
			for _, table := range []string{"payments", "notification_log"} {
				if _, err := s.db.ExecContext(ctx, `ALTER TABLE away_`+table+` RENAME TO `+table); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// Two folds meet on PostgreSQL under READ COMMITTED: one makes the row of a new hour from
// the row before it, and between its read of that row and its write, the other adds to the
// row before (a delta of an earlier hour, folded by another instance). The one that adds
// waits for the charts' fold lock until the first commits, then adds to the new row as well:
// the later total counts both. (SQLite runs one writing transaction at a time.)
func TestChartFoldsMeetingLoseNothing(t *testing.T) {
	s := openEngine(t, "postgres")
	ctx := context.Background()
	const hour = 493000
	fold := func(hour int64, deltas map[string]int64) error {
		var sums []keyDelta
		for b, d := range deltas {
			sums = append(sums, keyDelta{key: []any{hour, chartPaidLatency, b}, delta: d})
		}
		return s.InTx(ctx, func(tx orderpay.Tx) error { return addChartTotals(ctx, tx.(*queries), sums) })
	}
	if err := fold(hour, map[string]int64{"100": 1}); err != nil {
		t.Fatal(err)
	}
	other := make(chan error, 1)
	waited, started := false, false
	chartTotalRead = func() {
		chartTotalRead = nil
		started = true
		go func() { other <- fold(hour, map[string]int64{"100": 2, "200": 5}) }()
		// Until the other fold waits for a lock, or has finished (it did not have to wait).
		for deadline := time.Now().Add(20 * time.Second); !waited && len(other) == 0 && time.Now().Before(deadline); {
			time.Sleep(2 * time.Millisecond)
			waited = s.chartFoldWaits(ctx, t) > 0
		}
	}
	// The hook clears itself before the other fold starts, which reads it: cleared here
	// again only once that fold has ended.
	err := fold(hour+1, map[string]int64{"100": 10})
	if started {
		if oerr := <-other; oerr != nil {
			t.Fatal(oerr)
		}
	}
	chartTotalRead = nil
	if err != nil || !started {
		t.Fatalf("the fold of the later hour: %v (met: %v)", err, started)
	}
	if !waited {
		t.Error("the other fold did not wait for this one's lock: the two met without it")
	}
	for _, c := range []struct {
		from int64
		want map[string]int64
	}{{hour, map[string]int64{"100": 13, "200": 5}}, {hour + 1, map[string]int64{"100": 10}}} {
		got, err := s.chartCounts(ctx, chartPaidLatency, time.UnixMilli(c.from*msPerHour))
		if err != nil || !maps.Equal(got, c.want) {
			t.Errorf("from hour %d: %v, %v; want %v", c.from-hour, got, err, c.want)
		}
	}
}

// chartFoldWaits is how many sessions wait for the charts' fold lock.
func (s *Store) chartFoldWaits(ctx context.Context, t *testing.T) int {
	t.Helper()
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event_type = 'Lock' AND query = $1`, s.d.lockChartFold).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Deltas of random hours (often an earlier hour's after a later one's), kinds and buckets,
// folded after some rounds and not others: each kind's counts from any hour on are the
// deltas' sums from that hour on, folded or not, on both engines.
func TestChartTotalsSumTheirDeltas(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			s := openEngine(t, engine)
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(37, uint64(len(engine))))
			const first = 493000
			type key struct {
				hour         int64
				kind, bucket string
			}
			sums := map[key]int64{}
			kinds := []string{chartPaidLatency, chartNotification}
			for round := range 6 {
				for range rng.IntN(40) {
					k := key{first + rng.Int64N(5), kinds[rng.IntN(2)], fmt.Sprint(rng.IntN(4))}
					if _, err := s.db.ExecContext(ctx, s.d.rebind(`INSERT INTO chart_count_deltas (hour, kind, bucket, delta) VALUES (?, ?, ?, 1)`),
						k.hour, k.kind, k.bucket); err != nil {
						t.Fatal(err)
					}
					sums[k]++
				}
				if round%3 != 2 { // the last round's deltas stay unfolded
					if _, err := s.FoldCounts(ctx); err != nil {
						t.Fatal(err)
					}
				}
				for from := int64(first); from <= first+5; from++ {
					for _, kind := range kinds {
						want := map[string]int64{}
						for k, n := range sums {
							if k.kind == kind && k.hour >= from {
								want[k.bucket] += n
							}
						}
						got, err := s.chartCounts(ctx, kind, time.UnixMilli(from*msPerHour))
						if err != nil || !maps.Equal(got, want) {
							t.Fatalf("round %d, %s from hour %d: %v, %v; want %v", round, kind, from, got, err, want)
						}
					}
				}
			}
		})
	}
}
