package main

import (
	"bytes"
	"context"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/chaos"
)

// The reconciliation admin endpoints on a running server, and `orderpay reconcile` against
// the same database and simulator. serve's simulator runs on the wall clock, so the day
// reconciled is two days ago: both channels' bills of it are out at any hour.
func TestReconciliationAdminAndCommand(t *testing.T) {
	t.Parallel()
	m, c := startMain(t, "", func(m *Main) { m.Config.ReconcileAt = ReconcileOff })
	ctx := context.Background()
	date := orderpay.BillDay(time.Now().AddDate(0, 0, -2))
	admin := http.Header{"Authorization": {"Bearer " + m.AdminToken}}

	var rep chaos.ReconciliationView
	if err := c.call(ctx, http.MethodPost, m.URL+"/admin/reconciliations", admin, map[string]string{"channel": "wechat", "date": date}, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.ID == 0 || rep.Channel != "wechat" || rep.Date != date || rep.BillRows != 0 || rep.Unexplained != 0 {
		t.Fatalf("report %+v", rep)
	}
	var list struct{ Reconciliations []chaos.ReconciliationView }
	if err := c.call(ctx, http.MethodGet, m.URL+"/admin/reconciliations?channel=wechat", admin, nil, &list); err != nil ||
		len(list.Reconciliations) != 1 || list.Reconciliations[0].ID != rep.ID {
		t.Fatalf("list %+v, %v", list, err)
	}
	var one chaos.ReconciliationView
	if err := c.call(ctx, http.MethodGet, m.URL+"/admin/reconciliations/"+strconv.FormatInt(rep.ID, 10), admin, nil, &one); err != nil || one.ID != rep.ID {
		t.Fatalf("read %+v, %v", one, err)
	}
	// Bad input: a JSON error, nothing stored.
	today := orderpay.BillDay(time.Now())
	for _, tc := range []struct {
		method, path string
		header       http.Header
		body         any
		code         string
	}{
		{http.MethodPost, "/admin/reconciliations", nil, map[string]string{"channel": "wechat", "date": date}, orderpay.EUNAUTHORIZED},
		{http.MethodPost, "/admin/reconciliations", admin, map[string]string{"channel": "paypal", "date": date}, orderpay.EINVALID},
		{http.MethodPost, "/admin/reconciliations", admin, map[string]string{"channel": "wechat", "date": "2026-02-30"}, orderpay.EINVALID},
		{http.MethodPost, "/admin/reconciliations", admin, map[string]any{"channel": "wechat", "day": date}, orderpay.EINVALID},
		{http.MethodPost, "/admin/reconciliations", admin, map[string]string{"channel": "alipay", "date": today}, orderpay.EUNAVAILABLE},
		{http.MethodGet, "/admin/reconciliations/abc", admin, nil, orderpay.EINVALID},
		{http.MethodGet, "/admin/reconciliations/99999", admin, nil, orderpay.ENOTFOUND},
		{http.MethodGet, "/admin/reconciliations?date=yesterday", admin, nil, orderpay.EINVALID},
	} {
		if err := c.call(ctx, tc.method, m.URL+tc.path, tc.header, tc.body, nil); apiCode(err) != tc.code {
			t.Errorf("%s %s %v: %v, want %s", tc.method, tc.path, tc.body, err, tc.code)
		}
	}
	if err := c.call(ctx, http.MethodGet, m.URL+"/admin/reconciliations", admin, nil, &list); err != nil || len(list.Reconciliations) != 1 {
		t.Fatalf("bad input stored a report: %+v, %v", list, err)
	}

	// The command, against the server's database and simulator.
	var out, errOut bytes.Buffer
	keysDir := filepath.Join(m.Config.DataDir, "keys")
	keys, err := sim.LoadOrCreateKeys(keysDir)
	if err != nil {
		t.Fatal(err)
	}
	err = run(ctx, []string{"reconcile", "--channel", "alipay", "--date", date, "--data", m.Config.DataDir,
		"--channels", simChannelsFile(t, keysDir, keys, m.SimURL)}, &out, &errOut)
	if err != nil || !strings.Contains(out.String(), "alipay bill of "+date) || !strings.Contains(out.String(), "unexplained      0") {
		t.Fatalf("orderpay reconcile: %v\n%s%s", err, out.String(), errOut.String())
	}
	if err := run(ctx, []string{"reconcile", "--date", date}, &out, &errOut); err != errUsage {
		t.Fatalf("without --channel: %v, want usage", err)
	}
	if err := c.call(ctx, http.MethodGet, m.URL+"/admin/reconciliations?channel=alipay&date="+date, admin, nil, &list); err != nil ||
		len(list.Reconciliations) != 1 {
		t.Fatalf("the command's report is not stored: %+v, %v", list, err)
	}
}

// --reconcile-at takes HH:MM or off.
func TestServeReconcileAtFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		arg  string
		fail bool
	}{{"09:45", false}, {"off", false}, {"25:00", true}, {"9am", true}} {
		m := NewMain()
		m.Stderr = &bytes.Buffer{}
		err := m.ParseFlags([]string{"--reconcile-at", tc.arg})
		if (err != nil) != tc.fail || (!tc.fail && m.Config.ReconcileAt != tc.arg) {
			t.Errorf("--reconcile-at %s: %v (%q)", tc.arg, err, m.Config.ReconcileAt)
		}
	}
	if NewMain().Config.ReconcileAt != "10:30" {
		t.Errorf("default %q, want 10:30", NewMain().Config.ReconcileAt)
	}
}
