package sim_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/smartwalle/alipay/v3"

	"orderpay/channel/sim"
	"orderpay/channel/sim/simtest"
)

// restartSim closes b's simulator and starts another on the same keys, clocks and cfg
// (StateDir in it), as a new process on the same directory would.
func restartSim(t *testing.T, b *wxBundle, cfg sim.Config) *wxBundle {
	t.Helper()
	b.sim.Close()
	b.srv.Close()
	cfg.Keys, cfg.Clock, cfg.WechatWallClock = b.keys, b.clock, b.wallClock
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := sim.New(cfg)
	if err != nil {
		t.Fatalf("sim.New after the restart: %v", err)
	}
	t.Cleanup(s.Close)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	nb := &bundle{sim: s, srv: srv, clock: b.clock, keys: b.keys}
	nb.client = sdkClient(t, b.keys.AppID, simtest.PEM(t, b.keys.AppPrivateKeyPEM), simtest.PEM(t, b.keys.AlipayPublicKeyPEM), nb.gatewayURL())
	return &wxBundle{bundle: nb, wk: b.wk, wallClock: b.wallClock}
}

// A simulator on a state directory remembers, across a restart, what a real channel
// never forgets: trades paid before it can be queried, refunded and closed, their refunds
// stay (and count against what is left to refund), out_trade_no stays taken, and the bill
// of the day lists them.
func TestStateKeepsTradesAcrossARestart(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "state")
	cfg := sim.Config{StateDir: dir}
	b := wxSetup(t, cfg)
	alipayTradeNo := b.alipayPaid(t, "ALI001", "10.00")
	if rsp := b.alipayRefund(t, "ALI001", "ALI001r1", "3.00"); rsp.Code != alipay.CodeSuccess {
		t.Fatalf("refund before the restart: %+v", rsp)
	}
	b.alipayScanned(t, "ALI002", "5.00")
	b.paid(t, "WXP001", 2000)
	b.prepay(t, "WXP002", 500, b.clock.Now().Add(time.Hour), "")

	b = restartSim(t, b, cfg)

	if q := b.bundle.query(t, "ALI001"); q.TradeStatus != "TRADE_SUCCESS" || q.TradeNo != alipayTradeNo {
		t.Fatalf("Alipay query after the restart: %+v", q)
	}
	// 3.00 was refunded before: 8.00 more is more than is left.
	if rsp := b.alipayRefund(t, "ALI001", "ALI001r2", "8.00"); rsp.Code == alipay.CodeSuccess {
		t.Fatalf("a refund beyond what is left was accepted: %+v", rsp)
	}
	if rsp := b.alipayRefund(t, "ALI001", "ALI001r2", "7.00"); rsp.Code != alipay.CodeSuccess {
		t.Fatalf("Alipay refund after the restart: %+v", rsp)
	}
	if rsp := b.alipayClose(t, "ALI002"); rsp.Code != alipay.CodeSuccess {
		t.Fatalf("Alipay close after the restart: %+v", rsp)
	}
	if st := b.tradeState(t, "WXP001"); st != "SUCCESS" {
		t.Fatalf("WeChat query after the restart: %s", st)
	}
	if a := b.refund(t, "WXP001", "WXP001r1", 2000, 2000); a.status != http.StatusOK {
		t.Fatalf("WeChat refund after the restart: %s", a)
	}
	if a := b.close(t, "WXP002"); a.status != http.StatusNoContent {
		t.Fatalf("WeChat close after the restart: %s", a)
	}
	// The same out_trade_no with other terms is still refused: it is taken.
	a := b.call(t, http.MethodPost, "/v3/pay/transactions/native", b.prepayBody("WXP001", 999, b.clock.Now().Add(time.Hour), ""))
	if a.status == http.StatusOK {
		t.Fatalf("WXP001 prepaid again for another amount after the restart: %s", a)
	}

	// And a second restart still has all of it, in creation order.
	b = restartSim(t, b, cfg)
	var got []string
	for _, e := range b.sim.Ledger() {
		got = append(got, e.OutTradeNo+" "+e.Status)
	}
	want := []string{"ALI001 TRADE_CLOSED", "ALI002 TRADE_CLOSED", "WXP001 REFUND", "WXP002 CLOSED"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Fatalf("ledger after two restarts: %v; want %v", got, want)
	}
	if e := alipayEntry(t, b.sim, "ALI001"); e.Refunded != 1000 || len(e.Refunds) != 2 {
		t.Fatalf("ALI001 after two restarts: %+v", e)
	}
	day := b.clock.Now().In(cst).Format("2006-01-02")
	b.clock.Advance(24 * time.Hour) // the day's bill is ready the next morning
	rsp := b.alipayBillURL(t, day)
	bill := downloadAlipayBill(t, rsp.BillDownloadURL)
	var billed []string
	for _, row := range bill.rows(t) {
		billed = append(billed, strings.Join(row, "|"))
	}
	if all := strings.Join(billed, "\n"); !strings.Contains(all, "ALI001") || !strings.Contains(all, alipayTradeNo) {
		t.Fatalf("the day's bill after the restarts has no A-1:\n%s", all)
	}
	// The state is the owner's only.
	for path, want := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, "journal.jsonl"): 0o600} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Fatalf("%s: %v, %v; want mode %#o", path, fi.Mode(), err, want)
		}
	}
	// No key is copied into it.
	journal, _ := os.ReadFile(filepath.Join(dir, "journal.jsonl"))
	if bytes.Contains(journal, []byte("PRIVATE KEY")) || bytes.Contains(journal, []byte(b.keys.Wechat.APIv3Key)) {
		t.Fatal("the state journal holds a key")
	}
}

// A notification due when the simulator stops is sent by the next one on its schedule:
// here the payment's first attempt failed, the restart comes before the second, and the
// second arrives once the clock reaches it. A refund's notification due at its settlement
// goes out too.
func TestStateSendsNotificationsDueAfterARestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	receiver := newNotifyReceiver(t, reply{http.StatusInternalServerError, "busy"}, reply{http.StatusOK, "success"})
	// Real time runs as the simulated clock in the first run, so that its retry cannot
	// come before the restart; the next runs wait for the hand-moved clock.
	cfg := sim.Config{StateDir: dir, RefundDelay: time.Hour}
	b := wxSetup(t, cfg)
	cfg.TimeScale = 1e4
	qr := b.precreate(t, "NTF001", "10.00", b.clock.Now().Add(time.Hour), receiver.srv.URL)
	if _, err := b.sim.Pay(context.Background(), qr); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(receiver.received()) == 1 })
	if rsp := b.alipayRefund(t, "NTF001", "NTF001r1", "4.00"); rsp.Code != alipay.CodeSuccess {
		t.Fatalf("refund: %+v", rsp)
	}

	b = restartSim(t, b, cfg)
	time.Sleep(50 * time.Millisecond)
	if n := len(receiver.received()); n != 1 {
		t.Fatalf("%d attempts before the retry was due; want 1", n)
	}
	b.clock.Advance(5 * time.Minute) // the classic schedule's second attempt is 4 minutes on
	st := waitNotify(t, b.sim, "NTF001")
	if !st.Acked || len(st.Attempts) != 1 {
		t.Fatalf("the payment's notification after the restart: %+v", st)
	}
	if body := receiver.received()[1]; !strings.Contains(body, "trade_status=TRADE_SUCCESS") || !strings.Contains(body, "out_trade_no=NTF001") {
		t.Fatalf("second attempt %s", body)
	}
	b.clock.Advance(time.Hour) // the refund settles
	if st := waitNotifyOf(t, b.sim, "NTF001", "NTF001r1"); !st.Acked {
		t.Fatalf("the refund's notification after the restart: %+v", st)
	}
	// Done: a third simulator sends nothing again.
	b = restartSim(t, b, cfg)
	time.Sleep(50 * time.Millisecond)
	if n := len(receiver.received()); n != 3 || len(b.sim.NotifyStats()) != 0 {
		t.Fatalf("after a third start: %d attempts, %+v", n, b.sim.NotifyStats())
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// The journal is replayed last record first, written afresh at start (one line per
// object), survives a torn last line, and refuses a corrupt line before it by file and
// line.
func TestStateJournal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := sim.Config{StateDir: dir}
	b := wxSetup(t, cfg)
	b.alipayPaid(t, "JRN001", "1.00")
	for i := range 5 {
		b.bundle.query(t, "JRN001") // looks change nothing: nothing written
		b.alipayRefund(t, "JRN001", "JRN001r"+string(rune('a'+i)), "0.10")
	}
	path := filepath.Join(dir, "journal.jsonl")
	before := lines(t, path)
	if before < 6 {
		t.Fatalf("%d lines after a payment and 5 refunds; want one per change", before)
	}
	b = restartSim(t, b, cfg)
	if n := lines(t, path); n != 1 {
		t.Fatalf("%d lines after the compaction at start; want 1 (one trade)", n)
	}
	if e := alipayEntry(t, b.sim, "JRN001"); e.Refunded != 50 || len(e.Refunds) != 5 {
		t.Fatalf("replayed %+v", e)
	}

	// A torn last line: skipped, with a warning.
	b.sim.Close()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"kind":"alipay_trade","id":"JRN001","value":{"out_tr`)
	f.Close()
	var logged bytes.Buffer
	b = restartSim(t, b, sim.Config{StateDir: dir, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if e := alipayEntry(t, b.sim, "JRN001"); e.Refunded != 50 {
		t.Fatalf("after a torn line %+v", e)
	}
	if !strings.Contains(logged.String(), "torn write") || !strings.Contains(logged.String(), path) {
		t.Fatalf("no warning of the torn line: %s", logged.String())
	}

	// A corrupt line before the last: an error naming the file and the line.
	b.sim.Close()
	data, _ := os.ReadFile(path)
	os.WriteFile(path, append([]byte("{not json\n"), data...), 0o600)
	_, err = sim.New(sim.Config{Keys: b.keys, Clock: b.clock, StateDir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("a corrupt first line: %v", err)
	}
}

func lines(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(data, []byte("\n"))
}

// A WeChat refund still settling when the simulator stops is notified by the next one when
// it settles: REFUND.SUCCESS reaches the refund's notify_url once, after the restart.
func TestStateNotifiesAWechatRefundSettlingAcrossARestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	receiver := newWxReceiver(t, reply{http.StatusOK, ""})
	cfg := sim.Config{StateDir: dir, RefundDelay: time.Hour}
	b := wxSetup(t, cfg)
	b.paid(t, "WRF001", 1000)
	if a := b.call(t, http.MethodPost, "/v3/refund/domestic/refunds", refundTo("WRF001", "WRF001R1", 400, 1000, receiver.url)); a.status != http.StatusOK {
		t.Fatalf("refund: %s", a)
	}
	cfg.TimeScale = 1e4
	b = restartSim(t, b, cfg)
	if got := b.refundQuery(t, "WRF001R1").json(t)["status"]; got != "PROCESSING" {
		t.Fatalf("the refund after the restart: %v", got)
	}
	b.clock.Advance(time.Hour)
	if st := waitNotifyOf(t, b.sim, "WRF001", "WRF001R1"); !st.Acked {
		t.Fatalf("the refund's notification after the restart: %+v", st)
	}
	if got := receiver.received(); len(got) != 1 || !strings.Contains(string(got[0].body), "REFUND.SUCCESS") {
		t.Fatalf("the receiver got %d notifications: %v", len(got), got)
	}
}

// Barcode (付款码) trades and the codes that made them survive a restart: an Alipay trade
// paid with a code is queried and refunded after it, a WeChat codepay whose buyer is still
// typing the password is paid when they finish after it, and the codes stay spent.
func TestStateKeepsBarcodeTradesAcrossARestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := sim.Config{StateDir: dir}
	b := wxSetup(t, cfg)
	aliCode := issue(t, b.sim, "alipay", "alice", sim.CodeConfirm, 0)
	if rsp := barcodePay(t, b.client, barcodePayReq("BCA001", "12.00", aliCode)); rsp.Code != alipay.CodeSuccess {
		t.Fatalf("trade.pay: %+v", rsp)
	}
	wxCode := issue(t, b.sim, "wechat", "bob", sim.CodePassword, 20*time.Second)
	if a := b.call(t, http.MethodPost, "/v3/pay/transactions/codepay", b.codepayBody("BCW001", 800, wxCode, nil)); a.status/100 != 2 {
		t.Fatalf("codepay: %s", a)
	}

	b = restartSim(t, b, cfg)
	if q := b.bundle.query(t, "BCA001"); q.TradeStatus != "TRADE_SUCCESS" {
		t.Fatalf("the barcode trade after the restart: %+v", q)
	}
	if rsp := b.alipayRefund(t, "BCA001", "BCA001R1", "12.00"); rsp.Code != alipay.CodeSuccess {
		t.Fatalf("its refund after the restart: %+v", rsp)
	}
	if st := b.tradeState(t, "BCW001"); st != "USERPAYING" {
		t.Fatalf("the codepay after the restart: %s", st)
	}
	b.clock.Advance(20 * time.Second)
	if st := b.tradeState(t, "BCW001"); st != "SUCCESS" {
		t.Fatalf("the codepay once the buyer typed the password: %s", st)
	}
	// Spent codes stay spent.
	if rsp := barcodePay(t, b.client, barcodePayReq("BCA002", "1.00", aliCode)); rsp.Code == alipay.CodeSuccess || !strings.Contains(rsp.SubMsg, "已使用") {
		t.Fatalf("a spent code paid again after the restart: %+v", rsp)
	}
	if e := alipayEntry(t, b.sim, "BCA001"); e.Method != "barcode" || e.Refunded != 1200 {
		t.Fatalf("ledger %+v", e)
	}
}
