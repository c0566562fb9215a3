package explore_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"orderpay/explore"
	"orderpay/internal/testmark"
)

// replay is the command that replays c, as the explorer prints it.
func replay(engine string) func(explore.Case) string {
	return func(c explore.Case) string {
		return fmt.Sprintf("go run ./cmd/orderpay explore --engine %s --case '%s'", engine, c.Name())
	}
}

// TestEveryPairOnSQLite is CI's sample of the exploration: every ordered pair of the
// catalogue's operations, A stopped at each of its steps, B run to its end, on SQLite under
// the first profile. Every case must settle with I1–I9 and the machines intact.
func TestEveryPairOnSQLite(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("the explorer's sample takes minutes: scripts/test runs it without the race detector")
	}
	ctx := context.Background()
	e := &explore.Explorer{Engine: "sqlite", Dir: t.TempDir()}
	defer e.Close()
	cases, err := e.Cases(ctx, explore.Profiles[:1], nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	var failures strings.Builder
	results := e.RunAll(ctx, cases, 2*runtime.GOMAXPROCS(0), &failures, replay("sqlite"))
	ran, failed, skipped := explore.Summary(results)
	t.Logf("%d cases, %d failed (%d listed, %d with no such step)", ran, failed, len(cases), skipped)
	if ran < len(explore.Catalogue)*10 {
		t.Errorf("only %d cases ran: the catalogue's pairs are not all explored", ran)
	}
	if failed > 0 {
		t.Errorf("%d cases failed:\n%s", failed, failures.String())
	}
}

// TestPairsOnPostgres runs the pairs of the operations that meet on two instances, and
// the statements of two transactions interleaved under READ COMMITTED: among them two
// instances' consumers serving one queued ticket.
func TestPairsOnPostgres(t *testing.T) {
	dsn := os.Getenv("ORDERPAY_TEST_PG")
	if dsn == "" || testing.Short() || raceDetector {
		t.Skip("ORDERPAY_TEST_PG is not set, or the race detector is on (scripts/test runs this without it)")
	}
	testmark.Reached(t, testmark.Postgres)
	ctx := context.Background()
	e := &explore.Explorer{Engine: "postgres", PG: dsn}
	defer e.Close()
	cases, err := e.Cases(ctx, explore.Profiles[:1], []string{"refund.send", "i2.refund.send", "cancel", "notify", "app.close", "wallet.pay",
		"ticket.serve", "i2.ticket.serve"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	var failures strings.Builder
	results := e.RunAll(ctx, cases, 2*runtime.GOMAXPROCS(0), &failures, replay("postgres"))
	ran, failed, _ := explore.Summary(results)
	t.Logf("%d cases, %d failed", ran, failed)
	if ran == 0 {
		t.Fatal("no case ran")
	}
	if failed > 0 {
		t.Errorf("%d cases failed:\n%s", failed, failures.String())
	}
}

// TestReplayIsTheSame replays cases twice: the traces are the same, byte for byte. The
// cases include a lock waited for, a crash, and a channel call met by the buyer's payment.
func TestReplayIsTheSame(t *testing.T) {
	e := &explore.Explorer{Engine: "sqlite", Dir: t.TempDir()}
	defer e.Close()
	replayTwice(t, e, []string{
		"unpaid/base: cancel@3 | wallet.pay",
		"unpaid/base: pay.alipay.qr@3 | timeout.close",
		"unpaid/base: pay.wechat.native@7 | pay.alipay.wap",
		"unpaid/base: cancel@2 | crash",
		"channel-paid/base: notify@2 | cancel",
		"refunding/base: refund.send@3 | ship",
		"ticket-waiting/base: ticket.serve.later@6 | ticket.sweep",
	})
}

// TestReplayIsTheSameOnPostgres: a statement of B waits for the row A's transaction
// updated, and runs after A's commit (READ COMMITTED); in the ticket's case the second
// instance's consumer waits for the first's order of the same ticket.
func TestReplayIsTheSameOnPostgres(t *testing.T) {
	dsn := os.Getenv("ORDERPAY_TEST_PG")
	if dsn == "" {
		t.Skip("ORDERPAY_TEST_PG is not set")
	}
	testmark.Reached(t, testmark.Postgres)
	e := &explore.Explorer{Engine: "postgres", PG: dsn}
	defer e.Close()
	replayTwice(t, e, []string{
		"requested/base: aftersale.approve@5 | aftersale.reject",
		"refunding/base: refund.send@8 | i2.refund.send",
		"unpaid/base: cancel@3 | crash",
		"ticket-waiting/base: ticket.serve@13 | i2.ticket.serve",
	})
	for _, name := range []string{"requested/base: aftersale.approve@5 | aftersale.reject", "ticket-waiting/base: ticket.serve@13 | i2.ticket.serve"} {
		r := e.Run(context.Background(), mustCase(t, name))
		if !strings.Contains(r.Trace.String(), "B waits for a row lock") {
			t.Errorf("%s: B did not wait for the row A updated:\n%s", name, r.Trace)
		}
	}
}

func mustCase(t *testing.T, name string) explore.Case {
	t.Helper()
	c, err := explore.ParseCase(name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func replayTwice(t *testing.T, e *explore.Explorer, names []string) {
	t.Helper()
	ctx := context.Background()
	for _, name := range names {
		c, err := explore.ParseCase(name)
		if err != nil {
			t.Fatal(err)
		}
		first := e.Run(ctx, c)
		second := e.Run(ctx, c)
		if first.Skipped {
			t.Errorf("%s: no such case (A has %d steps)", name, first.StepsA)
			continue
		}
		if first.Trace.String() != second.Trace.String() {
			t.Errorf("%s: the replay differs:\n--- first\n%s--- second\n%s", name, first.Trace, second.Trace)
		}
		if first.Failed() {
			t.Errorf("%s failed: %v\n%s", name, first.Failures, first.Trace)
		}
	}
}

// found are cases the explorer failed on the code of their day, each a defect since fixed:
// they pass now, on both engines.
var found = []string{
	// A till's barcode payment of an order the buyer was cancelling: the barcode attempt
	// opened on the payment the cancel left open (its QR code could still be scanned),
	// paid, the order refused it and the money went back, but the till was told PAID.
	"unpaid/base: cancel@10 | pay.barcode",
	"unpaid/base: pay.barcode@4 | cancel",
}

func TestFoundCasesPass(t *testing.T) {
	ctx := context.Background()
	engines := []*explore.Explorer{{Engine: "sqlite", Dir: t.TempDir()}}
	if dsn := os.Getenv("ORDERPAY_TEST_PG"); dsn != "" {
		testmark.Reached(t, testmark.Postgres)
		engines = append(engines, &explore.Explorer{Engine: "postgres", PG: dsn})
	}
	for _, e := range engines {
		defer e.Close()
		for _, name := range found {
			c, err := explore.ParseCase(name)
			if err != nil {
				t.Fatal(err)
			}
			if r := e.Run(ctx, c); r.Failed() || r.Skipped {
				t.Errorf("%s on %s: %v (skipped: %v)\n%s", name, e.Engine, r.Failures, r.Skipped, r.Trace)
			}
		}
	}
}

func TestCaseNamesParseBack(t *testing.T) {
	for _, name := range []string{"unpaid/base: cancel@3 | wallet.pay", "refunding/edge: refund.send@12 | i2.refund.send@4", "paid/reserve: bus@1 | crash"} {
		c, err := explore.ParseCase(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if c.Name() != name {
			t.Errorf("%q parses back as %q", name, c.Name())
		}
	}
	for _, bad := range []string{"", "unpaid/base: cancel | wallet.pay", "nowhere/base: cancel@1 | notify", "unpaid/base: nothing@1 | notify", "unpaid/none: cancel@1 | notify"} {
		if _, err := explore.ParseCase(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
