package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"orderpay"
	"orderpay/channel/channelfile"
	"orderpay/channel/sim"
	"orderpay/payment"
	"orderpay/reconcile"
	"orderpay/sqlstore"
)

// ReconcileOff switches the daily reconciliation off (--reconcile-at off).
const ReconcileOff = "off"

// newReconciler is reconciliation over the payment center's channels: every channel that
// serves bills, repaired through payments. obs hears the differences (nil: nobody).
func newReconciler(store *sqlstore.Store, channels map[string]orderpay.Channel, fees orderpay.FeeSchedule, payments *payment.Service,
	obs orderpay.Observer, log *slog.Logger) (*reconcile.Reconciler, error) {
	bills := map[string]orderpay.BillSource{}
	for name, ch := range channels {
		if src, ok := ch.(orderpay.BillSource); ok {
			bills[name] = src
		}
	}
	return reconcile.New(reconcile.Config{Store: store, Bills: bills, Fees: fees, Payments: payments, Observer: obs, Logger: log})
}

// startReconciliation wires reconciliation into serve: the admin endpoints always, and the
// daily run at Config.ReconcileAt (China time) unless it is off.
func (m *Main) startReconciliation(ctx context.Context, channels map[string]orderpay.Channel) (*reconcile.Reconciler, error) {
	rec, err := newReconciler(m.Store, channels, m.fees, m.Payments, m.Metrics, m.log)
	if err != nil || m.Config.ReconcileAt == ReconcileOff {
		return rec, err
	}
	sched := &reconcile.Schedule{Reconciler: rec, At: m.Config.ReconcileAt, Logger: m.log}
	if err := sched.Start(ctx); err != nil {
		return nil, err
	}
	m.closeFuncs = append(m.closeFuncs, sched.Stop)
	return rec, nil
}

// runReconcile is `orderpay reconcile`: one reconciliation of one channel's bill of one day,
// against the database and the channels serve uses (the same flags and ORDERPAY_*
// variables). Lost payments it finds are repaired through the payment center; their events
// go out through the outbox when a server's relay runs. It fails if a difference is left
// unexplained, so that a cron job or an operator notices: it exits 0 when every difference
// is explained, 1 when one is not, 2 when it could not run.
func runReconcile(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	err := reconcileOnce(ctx, args, stdout, stderr)
	var ee *exitError
	if err == nil || errors.Is(err, flag.ErrHelp) || errors.Is(err, errUsage) || errors.As(err, &ee) {
		return err
	}
	return &exitError{code: 2, err: fmt.Errorf("reconcile could not run: %w", err)}
}

func reconcileOnce(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("orderpay reconcile", flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := NewMain().Config
	// The date's default is worked out once the flags are read, so that the help says
	// "yesterday" and not the date the help was printed on.
	c := struct{ channel, date, data, db, keys, channels, logLevel string }{data: def.DataDir, logLevel: "warn"}
	for _, f := range []struct {
		dst        *string
		name, help string
		env        bool
	}{
		{&c.channel, "channel", "alipay or wechat (required)", false},
		{&c.date, "date", "the bill date, yyyy-MM-dd China time (default: yesterday)", false},
		{&c.data, "data", "data directory (SQLite, simulator keys)", true},
		{&c.db, "db", "postgres:// DSN (default: SQLite under the data directory)", true},
		{&c.channels, "channels", "channels file of the merchant accounts (default: the built-in simulator of a serve with default flags)", true},
		{&c.keys, "keys", "the built-in simulator's keys and ids (default: <data>/keys)", true},
		{&c.logLevel, "log-level", "debug, info, warn or error", false},
	} {
		help, def := f.help, *f.dst
		if f.env {
			if v, ok := os.LookupEnv(envName(f.name)); ok {
				*f.dst = v
			}
			help += " [" + envName(f.name) + "]"
		}
		fs.StringVar(f.dst, f.name, *f.dst, help)
		showBuiltInDefault(fs, f.name, def)
	}
	if err := parseFlags(fs, args, stdout, stderr); err != nil {
		return err
	}
	if c.date == "" {
		c.date = reconcile.Yesterday(time.Now())
	}
	if c.channel == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "orderpay reconcile: --channel alipay|wechat is required")
		fs.Usage()
		return errUsage
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	store, err := sqlstore.Open(ctx, cmp.Or(c.db, filepath.Join(c.data, "orderpay.db")))
	if err != nil {
		return err
	}
	defer store.Close()
	var file *channelfile.File
	if c.channels != "" {
		if file, err = channelfile.Load(c.channels); err != nil {
			return err
		}
	} else {
		keysDir := cmp.Or(c.keys, filepath.Join(c.data, "keys"))
		keys, err := sim.LoadOrCreateKeys(keysDir)
		if err != nil {
			return err
		}
		file = channelfile.ForSimulator(keysDir, keys, "http://"+def.SimAddr, channelfile.AlipayKeyMode, channelfile.WechatPubKeyMode)
	}
	channels, err := file.Channels("")
	if err != nil {
		return err
	}
	// No precreate runs here, so no notify URL is handed out; results travel through the
	// outbox only.
	payments, err := payment.New(payment.Config{Store: store, Channels: channels, Fees: file.Fees(), NotifyURL: func(string) string { return "" },
		Logger: log})
	if err != nil {
		return err
	}
	// A one-off process has no /metrics to scrape: its figures are the printed report.
	rec, err := newReconciler(store, channels, file.Fees(), payments, nil, log)
	if err != nil {
		return err
	}
	rep, err := rec.Run(ctx, c.channel, c.date)
	if err != nil {
		return err
	}
	printReconciliation(stdout, rep)
	if rep.Unexplained > 0 {
		return &exitError{code: 1, err: fmt.Errorf("%d unexplained differences (report %d)", rep.Unexplained, rep.ID)}
	}
	return nil
}

// printReconciliation writes a report's figures, its three layers, and every item that is
// not a plain match.
func printReconciliation(w io.Writer, rep *orderpay.Reconciliation) {
	fmt.Fprintf(w, "reconciliation %d: %s bill of %s, account %s, %d rows\n", rep.ID, rep.Channel, rep.Date, cmp.Or(rep.Account, "-"), rep.BillRows)
	for _, class := range []orderpay.ReconClass{orderpay.ReconMatched, orderpay.ReconMissingLocal, orderpay.ReconMissingChannel,
		orderpay.ReconAmountMismatch, orderpay.ReconRefundMismatch} {
		fmt.Fprintf(w, "  %-16s %d\n", class, rep.Counts[class])
	}
	for _, l := range orderpay.ReconLayers {
		ls := rep.Layers[l]
		state := "explained"
		if ls.Unexplained > 0 {
			state = "UNEXPLAINED"
		}
		fmt.Fprintf(w, "  layer %-10s %-11s differences %d, unexplained %d (%s yuan)\n", l, state, ls.Differences, ls.Unexplained,
			orderpay.FormatYuan(ls.UnexplainedAmount))
	}
	if f := rep.Figures; f.FeesChecked {
		fmt.Fprintf(w, "  fees: expected %s, bill rows %s, bill total %s\n", orderpay.FormatYuan(f.FeeExpected), orderpay.FormatYuan(f.FeeBill),
			orderpay.FormatYuan(f.FeeSummary))
		if f.SettlementChecked {
			fmt.Fprintf(w, "  settlement: expected %s, account %s (%d movements)", orderpay.FormatYuan(f.NetExpected), orderpay.FormatYuan(f.NetBill),
				f.Movements)
			if f.BalanceKnown {
				fmt.Fprintf(w, "; balance %s to %s", orderpay.FormatYuan(f.Opening), orderpay.FormatYuan(f.Closing))
			}
			if f.PrevKnown {
				fmt.Fprintf(w, "; %s closed at %s", f.PrevDate, orderpay.FormatYuan(f.PrevClosing))
			}
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintf(w, "  unexplained      %d\n", rep.Unexplained)
	for _, it := range rep.Items {
		if it.Class == orderpay.ReconMatched {
			continue
		}
		fmt.Fprintf(w, "  %s %s %s %s %s %s: bill %s, ours %s, difference %s; %s\n", it.Layer, it.Class, cmp.Or(string(it.Resolution), "-"),
			cmp.Or(string(it.Kind), "-"), cmp.Or(it.OutTradeNo, "-"), it.OutRefundNo, orderpay.FormatYuan(it.BillAmount),
			orderpay.FormatYuan(it.LocalAmount), orderpay.FormatYuan(it.Difference), it.Detail)
	}
}
