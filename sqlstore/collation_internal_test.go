package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"orderpay"
	"orderpay/internal/testmark"
)

// A shop's PostgreSQL database is seldom initialised with the C collation. In one that
// compares text as en-US does (ICU: "a" before "B", and "aB1" between "A" and "B"), the
// search by the start of an order number finds exactly the numbers that begin with it,
// byte for byte, wildcards and all, through its index.
func TestOrderNumberPrefixOnAnEnglishCollation(t *testing.T) {
	t.Parallel()
	server := postgresServer(t)
	ctx := context.Background()
	admin, err := sql.Open(postgresDialect.driver, server)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("orderpay_en_%d", time.Now().UnixNano())
	// ICU's en-US (PostgreSQL 15 and up, built with ICU as Debian's is); C.UTF-8 is only
	// the character classification, which every glibc has.
	if _, err := admin.ExecContext(ctx, `CREATE DATABASE `+name+` TEMPLATE template0 ENCODING 'UTF8'
		LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'`); err != nil {
		t.Fatalf("a database collated as en-US: %v", err)
	}
	t.Cleanup(func() {
		if _, err := admin.ExecContext(context.Background(), `DROP DATABASE `+name+` WITH (FORCE)`); err != nil {
			t.Logf("drop database %s: %v", name, err)
		}
		admin.Close()
	})
	u, err := url.Parse(server)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	s, err := Open(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() }) // before the database is dropped

	// The database does not compare as bytes do: else this test would prove nothing.
	var aBeforeB, collation string
	if err := s.db.QueryRowContext(ctx, `SELECT CASE WHEN 'aB1' < 'B' AND 'aB1' > 'A' THEN 'yes' ELSE 'no' END,
		(SELECT daticulocale FROM pg_database WHERE datname = current_database())`).Scan(&aBeforeB, &collation); err != nil {
		t.Fatal(err)
	}
	if aBeforeB != "yes" || collation != "en-US" {
		t.Fatalf("the database's collation is %q and 'aB1' between 'A' and 'B' is %s: not en-US", collation, aBeforeB)
	}

	// History (numbers of 20 digits, over a year) and numbers where en-US order and byte
	// order part: case, punctuation, LIKE's wildcards and escape, non-ASCII.
	fillPlanFixture(t, s, planFixtureOrders)
	odd := []string{"A1", "AB1", "Ab1", "aB1", "ab1", "A-1", "A-B", "A_1", "A%1", `A\1`, "A 1", "A.1", "B1", "b1", "Z9", "-1", "_1", "%1",
		"2025-01", "2025_01", "2025%1", "20251", "Ä1", "É1", "e1", "A\u00ff1", "A\u0100"}
	for i, no := range odd {
		planExec(t, s, `INSERT INTO orders (order_no, buyer_id, status, total, discount, payable, product_type, pay_deadline, created_at, updated_at)
			VALUES (?, 'odd', 'COMPLETED', 1, 0, 1, 'NORMAL', 0, ?, ?)`, no, int64(1767225600000+i), int64(1767225600000+i))
	}
	planExec(t, s, `ANALYZE`)
	var all []string
	rows, err := s.db.QueryContext(ctx, `SELECT order_no FROM orders`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var no string
		if err := rows.Scan(&no); err != nil {
			t.Fatal(err)
		}
		all = append(all, no)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()

	for _, prefix := range []string{"A", "a", "A-", "A_", "A%", `A\`, "A ", "AB", "Ab", "B", "-", "_", "%", "2025-", "2025_", "2025%",
		"2025", "20250101", "2025010110000000000", "Ä", "É", "e", "A\u00ff", "Z", "z", "9"} {
		var want []string
		for _, no := range all {
			if strings.HasPrefix(no, prefix) {
				want = append(want, no)
			}
		}
		slices.Sort(want) // byte order
		slices.Reverse(want)
		limit := 50
		want = want[:min(len(want), limit)]
		got, err := s.Orders(ctx, orderpay.OrderFilter{NoPrefix: prefix}, limit)
		if err != nil {
			t.Fatalf("prefix %q: %v", prefix, err)
		}
		var nos []string
		for _, o := range got {
			nos = append(nos, o.No)
		}
		if !slices.Equal(nos, want) {
			t.Errorf("prefix %q: got %q, want %q (the first %d by number, descending)", prefix, nos, want, limit)
		}
	}

	q, args, _ := s.d.ordersQuery(orderpay.OrderFilter{NoPrefix: "2025"}, 50)
	plan := queryPlan(t, s, q, args...)
	st := plannedStatement{name: "console search by order-number prefix", postgresIndex: "orders_by_no_bytes"}
	if problems := planProblems(s.d, st, plan); len(problems) > 0 {
		t.Errorf("on en-US, the prefix search %s:\n%s", strings.Join(problems, "; "), plan)
	}
	t.Logf("on en-US, the prefix search:\n%s", plan)
}

// postgresServer is the PostgreSQL server the tests may use (ORDERPAY_TEST_PG), or skips t
// without one (fails it if ORDERPAY_TEST_PG_REQUIRED=1).
func postgresServer(t testing.TB) string {
	t.Helper()
	server := os.Getenv("ORDERPAY_TEST_PG")
	if server == "" {
		if os.Getenv("ORDERPAY_TEST_PG_REQUIRED") == "1" {
			t.Fatal("ORDERPAY_TEST_PG is not set but ORDERPAY_TEST_PG_REQUIRED=1")
		}
		t.Skip("ORDERPAY_TEST_PG not set")
	}
	testmark.Reached(t, testmark.Postgres)
	return server
}
