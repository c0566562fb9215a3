package sqlstore

import (
	"context"
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
