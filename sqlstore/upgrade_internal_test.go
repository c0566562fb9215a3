package sqlstore

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"orderpay"
)

// A store an older release left, with the raw channel answers in the history rows, is
// upgraded in place: every raw answer is still read with its transition, and history no
// longer has the column.
func TestUpgradeMovesRawAnswersBesideTheirTransitions(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	migrateThrough = 19
	s, err := Open(ctx, path)
	migrateThrough = 0
	if err != nil {
		t.Fatal(err)
	}
	for i, raw := range []string{"the channel's answer", "", "another answer"} {
		if _, err := s.db.ExecContext(ctx, `INSERT INTO history (entity, entity_no, from_status, to_status, event, actor, reason, raw, at)
			VALUES ('channel_order', 'T1', 'CREATED', 'PAYING', 'submit', 'system', '', ?, ?)`, raw, 1000+i); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()

	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h, err := s.History(ctx, orderpay.EntityChannelOrder, "T1")
	if err != nil || len(h) != 3 || h[0].Raw != "the channel's answer" || h[1].Raw != "" || h[2].Raw != "another answer" {
		t.Fatalf("history after the upgrade %+v, %v", h, err)
	}
	var cols []string
	rows, err := s.db.QueryContext(ctx, `SELECT name FROM pragma_table_info('history')`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var c string
		rows.Scan(&c)
		cols = append(cols, c)
	}
	rows.Close()
	if strings.Contains(strings.Join(cols, ","), "raw") {
		t.Fatalf("history still has columns %v", cols)
	}
	// New transitions keep their raw answer too.
	if err := s.InTx(ctx, func(tx orderpay.Tx) error {
		return tx.(*queries).appendHistory(ctx, orderpay.HistoryEntry{Entity: orderpay.EntityChannelOrder, EntityNo: "T1",
			From: "PAYING", To: "SUCCESS", Event: "notify", Actor: "system", Raw: "a third answer", At: orderpay.FromMillis(2000)})
	}); err != nil {
		t.Fatal(err)
	}
	if h, err := s.History(ctx, orderpay.EntityChannelOrder, "T1"); err != nil || len(h) != 4 || h[3].Raw != "a third answer" {
		t.Fatalf("history after a new transition %+v, %v", h, err)
	}
}

// A store an older release left, with paid payments and logged notifications, is upgraded
// in place: each paid payment gets its attempt's opening beside it (migration 0033), and the
// charts' hourly counts are made from the rows already there (migration 0036), with the
// same latencies as the charts read joined before. A paid payment whose attempt is not in
// the store (none should be) is left out, as the join left it out.
func TestUpgradeKeepsEachPaidAttemptsOpening(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			ctx := context.Background()
			dsn := engineDSN(t, engine)
			migrateThrough = 32
			s, err := Open(ctx, dsn)
			migrateThrough = 0
			if err != nil {
				t.Fatal(err)
			}
			const t0 = int64(1_764_000_000_000)
			payment := func(no, status, attempt string, paidAt int64) {
				if _, err := s.db.ExecContext(ctx, s.Rebind(`INSERT INTO payments (payment_no, order_no, amount, status, subject, pay_deadline,
					paid_channel, paid_out_trade_no, created_at, updated_at, paid_at) VALUES (?, ?, 100, ?, 'x', ?, 'alipay', ?, ?, ?, ?)`),
					no, "O"+no, status, t0+3_600_000, attempt, t0, t0, paidAt); err != nil {
					t.Fatal(err)
				}
			}
			attempt := func(no, paymentNo string, openedAt int64) {
				if _, err := s.db.ExecContext(ctx, s.Rebind(`INSERT INTO channel_orders (out_trade_no, payment_no, channel, seq, amount, status,
					created_at, updated_at) VALUES (?, ?, 'alipay', 1, 100, 'SUCCESS', ?, ?)`), no, paymentNo, openedAt, openedAt); err != nil {
					t.Fatal(err)
				}
			}
			payment("P1", "SUCCESS", "P1A01", t0+4_250) // paid 4.25 s after it began, 3.25 s after its attempt opened
			attempt("P1A01", "P1", t0+1_000)
			payment("P2", "SUCCESS", "P2A01", t0+9_000) // 2 s
			attempt("P2A01", "P2", t0+7_000)
			payment("P3", "SUCCESS", "P3A09", t0+9_500) // its attempt is not here
			payment("P4", "PAYING", "", 0)
			for _, at := range []int64{t0 + 500, t0 + 9_000, t0 - 3_600_000} { // the last in the hour before t0's
				if _, err := s.db.ExecContext(ctx, s.Rebind(`INSERT INTO notification_log (received_at, channel, out_trade_no, verified, result, raw)
					VALUES (?, 'alipay', 'P1A01', 1, 'applied', '')`), at); err != nil {
					t.Fatal(err)
				}
			}
			attempt("P4A01", "P4", t0+2_000)
			s.Close()

			s, err = Open(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			lat, err := s.PaidLatencyCounts(ctx, orderpay.FromMillis(t0))
			want := []orderpay.LatencyCount{{UpTo: 2 * time.Second, Count: 1}, {UpTo: 4 * time.Second, Count: 1}}
			if err != nil || !slices.Equal(lat, want) {
				t.Fatalf("paid latencies after the upgrade %v, %v; want %v (2 s and 3.25 s)", lat, err, want)
			}
			var p1 int64
			if err := s.db.QueryRowContext(ctx, `SELECT paid_attempt_at FROM payments WHERE payment_no = 'P1'`).Scan(&p1); err != nil || p1 != t0+1_000 {
				t.Fatalf("P1's attempt opened at %d (%v); want %d", p1, err, t0+1_000)
			}
			outcomes, err := s.NotificationOutcomes(ctx, orderpay.FromMillis(t0))
			if err != nil || len(outcomes) != 1 || outcomes[0] != (orderpay.NotificationOutcomeCount{Verified: true, Result: orderpay.NotifyApplied, Count: 2}) {
				t.Fatalf("notification outcomes after the upgrade %+v, %v; want two verified and applied", outcomes, err)
			}
			var opened int64
			if err := s.db.QueryRowContext(ctx, `SELECT paid_attempt_at FROM payments WHERE payment_no = 'P4'`).Scan(&opened); err != nil || opened != 0 {
				t.Fatalf("an unpaid payment has paid_attempt_at %d (%v)", opened, err)
			}
		})
	}
}
