package wechat_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/channel/sim/simtest"
	"orderpay/channel/wechat"
)

func TestRoundTrip_PrecreatePayQueryAndVerifiedNotification(t *testing.T) {
	t.Parallel()
	e := setup(t)
	m := newMerchant(t, e.ch)
	deadline := e.clock.Now().Add(30*time.Minute + 500*time.Millisecond)

	pre := e.precreate(t, "RT_0001", 1234, deadline, m.srv.URL+"/notify/wechat")
	if pre.Outcome != orderpay.OutcomeAccepted || !strings.HasPrefix(pre.QRCode, "weixin://wxpay/bizpayurl?pr=") {
		t.Fatalf("precreate: %+v", pre)
	}
	// time_expire has whole seconds: the code expires at the deadline cut to the second.
	if want := deadline.Truncate(time.Second); !pre.QRExpiresAt.Equal(want) {
		t.Errorf("QRExpiresAt %v, want %v", pre.QRExpiresAt, want)
	}
	if !strings.Contains(pre.Raw, pre.QRCode) || pre.Detail != "HTTP 200" {
		t.Errorf("Raw %q Detail %q", pre.Raw, pre.Detail)
	}
	if q := e.ch.Query(context.Background(), "RT_0001"); q.Outcome != orderpay.OutcomeNotPaid || !strings.Contains(q.Detail, "NOTPAY") {
		t.Fatalf("query before payment: %+v, want NotPaid", q)
	}

	e.clock.Advance(90 * time.Second)
	paid, err := e.sim.Pay(context.Background(), pre.QRCode)
	if err != nil {
		t.Fatal(err)
	}
	q := e.ch.Query(context.Background(), "RT_0001")
	if q.Outcome != orderpay.OutcomePaid || q.Amount != 1234 || q.TradeNo != paid.TradeNo || !q.PaidAt.Equal(e.clock.Now()) {
		t.Fatalf("query after payment: %+v, want Paid 1234 %s at %v", q, paid.TradeNo, e.clock.Now())
	}

	got, ns, errs := m.wait(t, 1)
	if errs[0] != nil {
		t.Fatalf("the simulator's notification does not verify: %v", errs[0])
	}
	n := ns[0]
	if n.Outcome != orderpay.OutcomePaid || n.Amount != 1234 || n.OutTradeNo != "RT_0001" || n.TradeNo != paid.TradeNo ||
		n.Channel != orderpay.ChannelWechat || n.NotifyID == "" || !n.PaidAt.Equal(e.clock.Now()) {
		t.Errorf("notification %+v", n)
	}
	var raw struct {
		Notification      map[string]any `json:"notification"`
		ResourcePlaintext map[string]any `json:"resource_plaintext"`
	}
	if err := json.Unmarshal([]byte(n.Raw), &raw); err != nil || raw.Notification["id"] != n.NotifyID ||
		raw.ResourcePlaintext["out_trade_no"] != "RT_0001" || !strings.Contains(n.Raw, string(got[0].body)) {
		t.Errorf("Raw %q: %v", n.Raw, err)
	}
	// The adapter's Ack (204) is what WeChat takes: one attempt, acknowledged.
	waitUntil(t, func() bool {
		st := e.sim.NotifyStats()
		return len(st) == 1 && st[0].Done()
	})
	if st := e.sim.NotifyStats()[0]; !st.Acked || len(st.Attempts) != 1 || st.Attempts[0].Status != http.StatusNoContent {
		t.Fatalf("delivery %+v, want acknowledged on the first attempt", st)
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatal("condition not reached in time")
}

func TestPrecreate_RepeatGivesSameCode_ExistingOrdersAreUnknownUntilQueried(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	first := e.accepted(t, "REP_0001", 500, "")
	if again := e.accepted(t, "REP_0001", 500, ""); again.QRCode != first.QRCode {
		t.Fatalf("repeat gave %s, first %s", again.QRCode, first.QRCode)
	}
	deadline := e.clock.Now().Add(time.Hour)

	// §C: OUT_TRADE_NO_USED, ORDER_CLOSED (and ORDERPAID) say the number exists: query it.
	other := e.precreate(t, "REP_0001", 600, deadline, "")
	if other.Outcome != orderpay.OutcomeUnknown || !strings.Contains(other.Detail, "OUT_TRADE_NO_USED") {
		t.Fatalf("same number, other amount: %+v, want Unknown OUT_TRADE_NO_USED", other)
	}
	if c := e.ch.Close(ctx, "REP_0001"); c.Outcome != orderpay.OutcomeClosed {
		t.Fatalf("close: %+v", c)
	}
	closed := e.precreate(t, "REP_0001", 500, deadline, "")
	if closed.Outcome != orderpay.OutcomeUnknown || !strings.Contains(closed.Detail, "ORDER_CLOSED") {
		t.Fatalf("precreate of a closed order: %+v, want Unknown ORDER_CLOSED", closed)
	}
	if q := e.ch.Query(ctx, "REP_0001"); q.Outcome != orderpay.OutcomeClosed {
		t.Fatalf("the query that decides: %+v, want Closed", q)
	}

	no := e.paid(t, 700)
	paid := e.precreate(t, no, 700, deadline, "")
	if paid.Outcome != orderpay.OutcomeUnknown || !strings.Contains(paid.Detail, "ORDERPAID") {
		t.Fatalf("precreate of a paid order: %+v, want Unknown ORDERPAID", paid)
	}
	if q := e.ch.Query(ctx, no); q.Outcome != orderpay.OutcomePaid {
		t.Fatalf("the query that decides: %+v, want Paid", q)
	}
}

func TestPrecreate_RefusedByTheChannelIsRejected(t *testing.T) {
	t.Parallel()
	e := setup(t)
	_, forger := simtest.Keys(t)
	forgerPEM, _ := sim.PrivateKeyPEM(forger)
	deadline := e.clock.Now().Add(time.Hour)
	req := orderpay.PrecreateRequest{OutTradeNo: "REJ_0001", Amount: 100, Subject: "x", Deadline: deadline}
	for name, mod := range map[string]func(*wechat.Config){
		"signed with another key (401 SIGN_ERROR)":    func(c *wechat.Config) { c.MerchantPrivateKeyPEM = forgerPEM },
		"another certificate serial (401 SIGN_ERROR)": func(c *wechat.Config) { c.MerchantSerial = strings.Repeat("B", 40) },
		"another app id (400 APPID_MCHID_NOT_MATCH)":  func(c *wechat.Config) { c.AppID = "wx0000000000000000" },
		"another merchant number (401 SIGN_ERROR)":    func(c *wechat.Config) { c.MchID = "1900000109" },
		"notify_url WeChat refuses (400 PARAM_ERROR)": nil,
	} {
		ch := e.ch
		r := req
		if mod != nil {
			ch = newChannel(t, e.keys, e.srv.URL, mod, func(c *wechat.Config) { c.Clock = e.clock })
		} else {
			r.NotifyURL = "ftp://merchant.example/notify"
		}
		res := ch.Precreate(context.Background(), r)
		if r.NotifyURL != "" {
			// Refused before sending: the adapter knows WeChat's rule.
			if res.Outcome != orderpay.OutcomeRejected || res.Raw != "" {
				t.Errorf("%s: %+v", name, res)
			}
			continue
		}
		if res.Outcome != orderpay.OutcomeRejected || res.Raw == "" {
			t.Errorf("%s: %+v, want Rejected by the channel", name, res)
		}
	}
	if l := e.sim.Ledger(); len(l) != 0 {
		t.Fatalf("refused prepays created orders: %+v", l)
	}
}

func TestPrecreate_NotSentWhenItBreaksWechatRules(t *testing.T) {
	t.Parallel()
	e := setup(t)
	now := e.clock.Now()
	ok := orderpay.PrecreateRequest{OutTradeNo: "NS_00001", Amount: 100, Subject: "x", Deadline: now.Add(time.Hour)}
	for name, mod := range map[string]func(*orderpay.PrecreateRequest){
		"out_trade_no of 5":       func(r *orderpay.PrecreateRequest) { r.OutTradeNo = "A1234" },
		"out_trade_no of 33":      func(r *orderpay.PrecreateRequest) { r.OutTradeNo = strings.Repeat("A", 33) },
		"out_trade_no with a dot": func(r *orderpay.PrecreateRequest) { r.OutTradeNo = "NS.00001" },
		"zero amount":             func(r *orderpay.PrecreateRequest) { r.Amount = 0 },
		"no subject":              func(r *orderpay.PrecreateRequest) { r.Subject = " " },
		"no deadline":             func(r *orderpay.PrecreateRequest) { r.Deadline = time.Time{} },
		"deadline passed":         func(r *orderpay.PrecreateRequest) { r.Deadline = now.Add(-time.Second) },
		"notify_url with a query": func(r *orderpay.PrecreateRequest) { r.NotifyURL = "https://m.example/n?x=1" },
	} {
		r := ok
		mod(&r)
		res := e.ch.Precreate(context.Background(), r)
		if res.Outcome != orderpay.OutcomeRejected || res.Raw != "" || !strings.HasPrefix(res.Detail, "not sent: ") {
			t.Errorf("%s: %+v, want Rejected without a call", name, res)
		}
	}
	if l := e.sim.Ledger(); len(l) != 0 {
		t.Fatalf("unsent prepays created orders: %+v", l)
	}
	// Every allowed character, and a subject longer than WeChat's 127 characters (cut).
	long := ok
	// A deadline under WeChat's one-minute floor is sent too: the timeout close, not
	// time_expire, is what stops the code (see Precreate).
	long.OutTradeNo, long.Subject, long.Deadline = "Ab-_|*9", strings.Repeat("茶", 200), now.Add(20*time.Second)
	if res := e.ch.Precreate(context.Background(), long); res.Outcome != orderpay.OutcomeAccepted {
		t.Fatalf("allowed characters and a long subject: %+v", res)
	}
	if !wechat.OutTradeNoPattern.MatchString("Ab-_|*9") || wechat.OutRefundNoPattern.MatchString("R 1") {
		t.Fatal("exported patterns")
	}
}

func TestQuery_EachTradeState(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	if q := e.ch.Query(ctx, "NOSUCH_01"); q.Outcome != orderpay.OutcomeNotPaid || !strings.Contains(q.Detail, "ORDER_NOT_EXIST") {
		t.Fatalf("never prepaid (404 ORDER_NOT_EXIST): %+v, want NotPaid", q)
	}
	pre := e.accepted(t, "QS_00001", 900, "")
	if _, err := e.sim.Decline(ctx, pre.QRCode); err != nil {
		t.Fatal(err)
	}
	if q := e.ch.Query(ctx, "QS_00001"); q.Outcome != orderpay.OutcomeNotPaid {
		t.Fatalf("NOTPAY after a declined scan: %+v", q)
	}
	if _, err := e.sim.Pay(ctx, pre.QRCode); err != nil {
		t.Fatal(err)
	}
	if r := e.ch.Refund(ctx, orderpay.RefundRequest{OutTradeNo: "QS_00001", OutRefundNo: "QS_00001_R1", Amount: 900, Total: 900}); r.Outcome != orderpay.OutcomeRefunded {
		t.Fatalf("refund: %+v", r)
	}
	// REFUND: it was paid, then refunded. Still Paid: the payment happened (§C).
	q := e.ch.Query(ctx, "QS_00001")
	if q.Outcome != orderpay.OutcomePaid || q.Amount != 900 || !strings.Contains(q.Detail, "REFUND") || !strings.Contains(q.Detail, "refunded") {
		t.Fatalf("REFUND: %+v, want Paid, saying refunded", q)
	}
}

func TestQuery_AnswersTheSimulatorNeverGivesAreHandled(t *testing.T) {
	t.Parallel()
	keys, _ := simtest.Keys(t)
	mch, app := keys.Wechat.MchID, keys.Wechat.AppID
	txn := func(state, extra string) string {
		return `{"appid":"` + app + `","mchid":"` + mch + `","out_trade_no":"QF_00001","trade_state":"` + state + `"` + extra + `}`
	}
	const paidFields = `,"transaction_id":"4200000000202503141234567890","success_time":"2025-03-14T10:00:00+08:00","amount":{"total":300,"payer_total":300,"currency":"CNY"}`
	for _, tc := range []struct {
		name string
		a    fakeAnswer
		want orderpay.Outcome
	}{
		{"SUCCESS", fakeAnswer{status: 200, body: txn("SUCCESS", paidFields), sign: true}, orderpay.OutcomePaid},
		{"SUCCESS without amount", fakeAnswer{status: 200, body: txn("SUCCESS", `,"transaction_id":"1"`), sign: true}, orderpay.OutcomeUnknown},
		// The barcode (micropay) states: the buyer is confirming; the payment failed; reversed.
		{"USERPAYING (barcode only)", fakeAnswer{status: 200, body: txn("USERPAYING", ""), sign: true}, orderpay.OutcomeNotPaid},
		{"REVOKED (barcode only)", fakeAnswer{status: 200, body: txn("REVOKED", ""), sign: true}, orderpay.OutcomeClosed},
		{"PAYERROR (barcode only)", fakeAnswer{status: 200, body: txn("PAYERROR", ""), sign: true}, orderpay.OutcomeClosed},
		{"REVOKED with a payment (reversed after it)", fakeAnswer{status: 200, body: txn("REVOKED", paidFields), sign: true}, orderpay.OutcomeUnknown},
		{"PAYERROR with a payment", fakeAnswer{status: 200, body: txn("PAYERROR", paidFields), sign: true}, orderpay.OutcomeUnknown},
		{"PAYERROR with a success_time only", fakeAnswer{status: 200, body: txn("PAYERROR", `,"success_time":"2025-03-14T10:00:00+08:00"`), sign: true}, orderpay.OutcomeUnknown},
		{"USERPAYING unsigned", fakeAnswer{status: 200, body: txn("USERPAYING", "")}, orderpay.OutcomeUnknown},
		{"a state never seen", fakeAnswer{status: 200, body: txn("ACCEPT", ""), sign: true}, orderpay.OutcomeUnknown},
		{"CLOSED with a payment", fakeAnswer{status: 200, body: txn("CLOSED", paidFields), sign: true}, orderpay.OutcomeUnknown},
		{"another out_trade_no", fakeAnswer{status: 200, body: strings.Replace(txn("SUCCESS", paidFields), "QF_00001", "QF_00002", 1), sign: true}, orderpay.OutcomeUnknown},
		{"another mchid", fakeAnswer{status: 200, body: strings.Replace(txn("SUCCESS", paidFields), mch, "1900000109", 1), sign: true}, orderpay.OutcomeUnknown},
		{"another appid", fakeAnswer{status: 200, body: strings.Replace(txn("SUCCESS", paidFields), app, "wx0000000000000000", 1), sign: true}, orderpay.OutcomeUnknown},
		{"SUCCESS unsigned", fakeAnswer{status: 200, body: txn("SUCCESS", paidFields)}, orderpay.OutcomeUnknown},
		{"SUCCESS signed 6 minutes ago", fakeAnswer{status: 200, body: txn("SUCCESS", paidFields), sign: true, at: time.Now().Add(-6 * time.Minute)}, orderpay.OutcomeUnknown},
		{"404 ORDERNOTEXIST", fakeAnswer{status: 404, body: `{"code":"ORDERNOTEXIST","message":"订单不存在"}`}, orderpay.OutcomeNotPaid},
		{"404 another code", fakeAnswer{status: 404, body: `{"code":"RESOURCE_NOT_EXISTS","message":"?"}`}, orderpay.OutcomeUnknown},
		{"400 PARAM_ERROR", fakeAnswer{status: 400, body: `{"code":"PARAM_ERROR","message":"参数错误"}`}, orderpay.OutcomeUnknown},
		{"401 SIGN_ERROR", fakeAnswer{status: 401, body: `{"code":"SIGN_ERROR","message":"签名错误"}`}, orderpay.OutcomeUnknown},
		{"500 SYSTEM_ERROR", fakeAnswer{status: 500, body: `{"code":"SYSTEM_ERROR","message":"系统错误"}`}, orderpay.OutcomeUnknown},
		{"429 FREQUENCY_LIMITED", fakeAnswer{status: 429, body: `{"code":"FREQUENCY_LIMITED","message":"频率超限"}`}, orderpay.OutcomeUnknown},
	} {
		ch := newChannel(t, keys, fakeWechat(t, keys, tc.a).URL)
		q := ch.Query(context.Background(), "QF_00001")
		if q.Outcome != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.name, q.Outcome, q.Detail, tc.want)
		}
		if tc.want == orderpay.OutcomePaid && (q.Amount != 300 || q.TradeNo != "4200000000202503141234567890" ||
			!q.PaidAt.Equal(time.Date(2025, 3, 14, 10, 0, 0, 0, cst))) {
			t.Errorf("%s: %+v", tc.name, q)
		}
	}
}

func TestPrecreate_AnswersTheSimulatorNeverGivesAreHandled(t *testing.T) {
	t.Parallel()
	keys, forger := simtest.Keys(t)
	code := `{"code_url":"weixin://wxpay/bizpayurl?pr=abc"}`
	for _, tc := range []struct {
		name string
		a    fakeAnswer
		want orderpay.Outcome
	}{
		{"signed code_url", fakeAnswer{status: 200, body: code, sign: true}, orderpay.OutcomeAccepted},
		{"signed, no code_url", fakeAnswer{status: 200, body: `{}`, sign: true}, orderpay.OutcomeUnknown},
		{"unsigned code_url", fakeAnswer{status: 200, body: code}, orderpay.OutcomeUnknown},
		{"code_url signed by a forger", fakeAnswer{status: 200, body: code, sign: true, signKey: forger}, orderpay.OutcomeUnknown},
		{"code_url signed 6 minutes ago", fakeAnswer{status: 200, body: code, sign: true, at: time.Now().Add(-6 * time.Minute)}, orderpay.OutcomeUnknown},
		{"400 PARAM_ERROR", fakeAnswer{status: 400, body: `{"code":"PARAM_ERROR","message":"参数错误"}`}, orderpay.OutcomeRejected},
		{"403 NOAUTH", fakeAnswer{status: 403, body: `{"code":"NOAUTH","message":"商户无权限"}`}, orderpay.OutcomeRejected},
		{"403 OUT_TRADE_NO_USED", fakeAnswer{status: 403, body: `{"code":"OUT_TRADE_NO_USED","message":"商户订单号重复"}`}, orderpay.OutcomeUnknown},
		{"400 ORDER_CLOSED", fakeAnswer{status: 400, body: `{"code":"ORDER_CLOSED","message":"订单已关闭"}`}, orderpay.OutcomeUnknown},
		{"429 FREQUENCY_LIMITED", fakeAnswer{status: 429, body: `{"code":"FREQUENCY_LIMITED","message":"频率超限"}`}, orderpay.OutcomeUnknown},
		{"500 SYSTEM_ERROR", fakeAnswer{status: 500, body: `{"code":"SYSTEM_ERROR","message":"系统错误"}`}, orderpay.OutcomeUnknown},
		{"502 HTML", fakeAnswer{status: 502, body: `<html>Bad Gateway</html>`}, orderpay.OutcomeUnknown},
	} {
		ch := newChannel(t, keys, fakeWechat(t, keys, tc.a).URL)
		res := ch.Precreate(context.Background(), orderpay.PrecreateRequest{OutTradeNo: "PF_00001", Amount: 100, Subject: "x",
			Deadline: time.Now().Add(time.Hour)})
		if res.Outcome != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.name, res.Outcome, res.Detail, tc.want)
		}
	}
}

func TestClose_ClosedOnlyWhenTheQueryAfterItSaysClosed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, mode := range []sim.WechatClosePaid{sim.WechatClosePaidRefused, sim.WechatClosePaidNoContent} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			e := setup(t, func(c *sim.Config) { c.WechatClosePaid = mode })
			pre := e.accepted(t, "CL_00001", 500, "")
			c := e.ch.Close(ctx, "CL_00001")
			if c.Outcome != orderpay.OutcomeClosed || !strings.Contains(c.Detail, "HTTP 204") || !strings.Contains(c.Detail, "CLOSED") {
				t.Fatalf("close of an unpaid order: %+v", c)
			}
			if _, err := e.sim.Pay(ctx, pre.QRCode); orderpay.ErrorCode(err) != orderpay.ECONFLICT {
				t.Fatalf("paying after the close: %v", err)
			}
			// A paid order: refused (ORDERPAID) or 204, the close never reports Closed.
			no := e.paid(t, 800)
			c = e.ch.Close(ctx, no)
			if c.Outcome != orderpay.OutcomeUnknown {
				t.Fatalf("close of a paid order: %+v, want Unknown", c)
			}
			if mode == sim.WechatClosePaidRefused && !strings.Contains(c.Detail, "ORDERPAID") {
				t.Fatalf("close of a paid order: %+v, want ORDERPAID in the detail", c)
			}
			if mode == sim.WechatClosePaidNoContent && !strings.Contains(c.Detail, "SUCCESS") {
				t.Fatalf("close of a paid order: %+v, want the query's SUCCESS in the detail", c)
			}
			if c := e.ch.Close(ctx, "NOSUCH_01"); c.Outcome != orderpay.OutcomeUnknown || !strings.Contains(c.Detail, "ORDER_NOT_EXIST") {
				t.Fatalf("close of an unknown order: %+v", c)
			}
		})
	}
}

func TestRefund_EachOutcomeFromTheSimulator(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *sim.Config) { c.RefundDelay = 10 * time.Minute })
	ctx := context.Background()
	no := e.paid(t, 1000)
	refund := func(outRefundNo string, amount int64) orderpay.RefundResult {
		return e.ch.Refund(ctx, orderpay.RefundRequest{OutTradeNo: no, OutRefundNo: outRefundNo, Amount: amount, Total: 1000, Reason: strings.Repeat("理由", 50)})
	}
	r := refund(no+"R1", 400)
	if r.Outcome != orderpay.OutcomeRefundPending || r.Amount != 400 || r.RefundID == "" || !strings.Contains(r.Detail, "PROCESSING") {
		t.Fatalf("accepted refund: %+v, want RefundPending", r)
	}
	if again := refund(no+"R1", 400); again.Outcome != orderpay.OutcomeRefundPending || again.RefundID != r.RefundID {
		t.Fatalf("replayed refund: %+v, want the same refund", again)
	}
	if q := e.ch.QueryRefund(ctx, no, no+"R1"); q.Outcome != orderpay.OutcomeRefundPending {
		t.Fatalf("query before it settles: %+v", q)
	}
	for name, got := range map[string]orderpay.RefundResult{
		"same number, other amount (INVALID_REQUEST)": refund(no+"R1", 500),
		"over-refund (INVALID_REQUEST)":               refund(no+"R2", 601),
		"unknown order (RESOURCE_NOT_EXISTS)": e.ch.Refund(ctx, orderpay.RefundRequest{OutTradeNo: "NOSUCH_01",
			OutRefundNo: "NOSUCH_01R1", Amount: 1, Total: 1}),
	} {
		if got.Outcome != orderpay.OutcomeRejected || got.Raw == "" {
			t.Errorf("%s: %+v, want Rejected by the channel", name, got)
		}
	}
	e.clock.Advance(10 * time.Minute)
	if q := e.ch.QueryRefund(ctx, no, no+"R1"); q.Outcome != orderpay.OutcomeRefunded || q.Amount != 400 || q.RefundID != r.RefundID {
		t.Fatalf("query after it settles: %+v, want Refunded 400", q)
	}
	if q := e.ch.QueryRefund(ctx, no, no+"R9"); q.Outcome != orderpay.OutcomeUnknown || !strings.Contains(q.Detail, "RESOURCE_NOT_EXISTS") {
		t.Fatalf("query of a refund that never arrived: %+v, want Unknown", q)
	}
	if q := e.ch.QueryRefund(ctx, "OTHER_001", no+"R1"); q.Outcome != orderpay.OutcomeUnknown {
		t.Fatalf("query of a refund under another order: %+v, want Unknown", q)
	}
	// Not sent: numbers WeChat refuses, amounts beyond the total.
	for name, req := range map[string]orderpay.RefundRequest{
		"bad out_refund_no":   {OutTradeNo: no, OutRefundNo: "R 1", Amount: 1, Total: 1000},
		"more than the total": {OutTradeNo: no, OutRefundNo: no + "R3", Amount: 1001, Total: 1000},
		"bad out_trade_no":    {OutTradeNo: "x", OutRefundNo: "R3", Amount: 1, Total: 1000},
	} {
		if got := e.ch.Refund(ctx, req); got.Outcome != orderpay.OutcomeRejected || got.Raw != "" {
			t.Errorf("%s: %+v, want Rejected without a call", name, got)
		}
	}
	if got := e.ch.QueryRefund(ctx, no, "R 1"); got.Outcome != orderpay.OutcomeRejected || got.Raw != "" {
		t.Errorf("query of an impossible number: %+v", got)
	}
}

func TestRefund_AnswersTheSimulatorNeverGivesAreHandled(t *testing.T) {
	t.Parallel()
	keys, forger := simtest.Keys(t)
	refund := func(status, extra string) string {
		return `{"refund_id":"50000000000000000000000000001","out_refund_no":"RF_00001R1","transaction_id":"4200",` +
			`"out_trade_no":"RF_00001","channel":"ORIGINAL","user_received_account":"支付用户零钱",` +
			`"create_time":"2025-03-14T10:00:00+08:00","status":"` + status + `",` +
			`"amount":{"total":1000,"refund":300,"payer_total":1000,"payer_refund":300,"settlement_refund":300,"settlement_total":1000,"discount_refund":0,"currency":"CNY"}` + extra + `}`
	}
	// query is the refund query's outcome for the same answer, when it differs: a refused
	// query says nothing about the refund, and a query has no amount to compare.
	type refundCase struct {
		name   string
		a      fakeAnswer
		want   orderpay.Outcome
		detail string
		query  orderpay.Outcome
	}
	for _, tc := range []refundCase{
		{"SUCCESS", fakeAnswer{status: 200, body: refund("SUCCESS", `,"success_time":"2025-03-14T10:00:05+08:00"`), sign: true}, orderpay.OutcomeRefunded, "SUCCESS", ""},
		{"PROCESSING", fakeAnswer{status: 200, body: refund("PROCESSING", ""), sign: true}, orderpay.OutcomeRefundPending, "PROCESSING", ""},
		{"CLOSED", fakeAnswer{status: 200, body: refund("CLOSED", ""), sign: true}, orderpay.OutcomeRefundAbnormal, "closed", ""},
		{"ABNORMAL", fakeAnswer{status: 200, body: refund("ABNORMAL", ""), sign: true}, orderpay.OutcomeRefundAbnormal, "manual", ""},
		{"a status never seen", fakeAnswer{status: 200, body: refund("PENDING", ""), sign: true}, orderpay.OutcomeUnknown, "unknown", ""},
		{"SUCCESS for another refund number", fakeAnswer{status: 200, body: strings.Replace(refund("SUCCESS", ""), "RF_00001R1", "RF_00001R2", 1), sign: true}, orderpay.OutcomeUnknown, "another", ""},
		{"SUCCESS for another amount", fakeAnswer{status: 200, body: strings.Replace(refund("SUCCESS", ""), `"refund":300`, `"refund":299`, 1), sign: true}, orderpay.OutcomeUnknown, "another amount", orderpay.OutcomeRefunded},
		{"SUCCESS unsigned", fakeAnswer{status: 200, body: refund("SUCCESS", "")}, orderpay.OutcomeUnknown, "not verified", ""},
		{"SUCCESS signed by a forger", fakeAnswer{status: 200, body: refund("SUCCESS", ""), sign: true, signKey: forger}, orderpay.OutcomeUnknown, "not verified", ""},
		// Refused for now: the same number can succeed later. A refused query says nothing.
		{"403 NOT_ENOUGH", fakeAnswer{status: 403, body: `{"code":"NOT_ENOUGH","message":"余额不足"}`}, orderpay.OutcomeRefundRetry, "NOT_ENOUGH", orderpay.OutcomeUnknown},
		{"403 NOTENOUGH (older spelling)", fakeAnswer{status: 403, body: `{"code":"NOTENOUGH","message":"余额不足"}`}, orderpay.OutcomeRefundRetry, "top it up", orderpay.OutcomeUnknown},
		{"429 FREQUENCY_LIMITED", fakeAnswer{status: 429, body: `{"code":"FREQUENCY_LIMITED","message":"频率限制"}`}, orderpay.OutcomeRefundRetry, "FREQUENCY_LIMITED", orderpay.OutcomeUnknown},
		// The buyer's account cannot take the money: a person must act.
		{"403 USER_ACCOUNT_ABNORMAL", fakeAnswer{status: 403, body: `{"code":"USER_ACCOUNT_ABNORMAL","message":"退款请求失败"}`}, orderpay.OutcomeRefundAbnormal, "USER_ACCOUNT_ABNORMAL", orderpay.OutcomeUnknown},
		{"404 RESOURCE_NOT_EXISTS", fakeAnswer{status: 404, body: `{"code":"RESOURCE_NOT_EXISTS","message":"订单不存在"}`}, orderpay.OutcomeRejected, "RESOURCE_NOT_EXISTS", orderpay.OutcomeUnknown},
		{"400 INVALID_REQUEST", fakeAnswer{status: 400, body: `{"code":"INVALID_REQUEST","message":"申请退款金额超过订单可退金额"}`}, orderpay.OutcomeRejected, "INVALID_REQUEST", orderpay.OutcomeUnknown},
		{"400 MCH_NOT_EXISTS", fakeAnswer{status: 400, body: `{"code":"MCH_NOT_EXISTS","message":"商户号不存在"}`}, orderpay.OutcomeRejected, "MCH_NOT_EXISTS", orderpay.OutcomeUnknown},
		{"403 NO_AUTH", fakeAnswer{status: 403, body: `{"code":"NO_AUTH","message":"没有退款权限"}`}, orderpay.OutcomeRejected, "NO_AUTH", orderpay.OutcomeUnknown},
		{"400 PARAM_ERROR", fakeAnswer{status: 400, body: `{"code":"PARAM_ERROR","message":"参数错误"}`}, orderpay.OutcomeRejected, "PARAM_ERROR", orderpay.OutcomeUnknown},
		{"401 SIGN_ERROR", fakeAnswer{status: 401, body: `{"code":"SIGN_ERROR","message":"签名错误"}`}, orderpay.OutcomeRejected, "SIGN_ERROR", orderpay.OutcomeUnknown},
		{"500 SYSTEM_ERROR", fakeAnswer{status: 500, body: `{"code":"SYSTEM_ERROR","message":"系统超时"}`}, orderpay.OutcomeUnknown, "SYSTEM_ERROR", ""},
		{"429 of another code", fakeAnswer{status: 429, body: `{"code":"TOO_MANY","message":"?"}`}, orderpay.OutcomeUnknown, "429", ""},
	} {
		ch := newChannel(t, keys, fakeWechat(t, keys, tc.a).URL)
		r := ch.Refund(context.Background(), orderpay.RefundRequest{OutTradeNo: "RF_00001", OutRefundNo: "RF_00001R1", Amount: 300, Total: 1000})
		if r.Outcome != tc.want || !strings.Contains(r.Detail, tc.detail) {
			t.Errorf("refund %s: %s (%s), want %s mentioning %q", tc.name, r.Outcome, r.Detail, tc.want, tc.detail)
		}
		q := ch.QueryRefund(context.Background(), "RF_00001", "RF_00001R1")
		want := tc.want
		if tc.query != "" {
			want = tc.query
		}
		if q.Outcome != want {
			t.Errorf("refund query %s: %s (%s), want %s", tc.name, q.Outcome, q.Detail, want)
		}
	}
}

// proxy forwards to the simulator and lets rewrite change each answer's body on the way.
func proxy(t *testing.T, e *env, rewrite func([]byte) []byte) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		e.sim.Handler().ServeHTTP(rec, r)
		for k, vs := range rec.Header() {
			w.Header()[k] = vs
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rewrite(rec.Body.Bytes()))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// The official SDK, inside the adapter, refuses an answer with one byte changed: the
// payment it would have shown stays Unknown.
func TestOfficialSDKRejectsTamperedAnswers(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	paid := e.paid(t, 700)
	flip := func(b []byte) []byte {
		if len(b) == 0 {
			return b
		}
		out := append([]byte(nil), b...)
		out[len(out)/2] ^= 0x01
		return out
	}
	ch := newChannel(t, e.keys, proxy(t, e, flip).URL, func(c *wechat.Config) { c.Clock = e.clock })
	if q := ch.Query(ctx, paid); q.Outcome != orderpay.OutcomeUnknown || !strings.Contains(q.Detail, "not verified") {
		t.Fatalf("tampered query: %+v, want Unknown", q)
	}
	if p := ch.Precreate(ctx, orderpay.PrecreateRequest{OutTradeNo: "TMP_0001", Amount: 100, Subject: "x", Deadline: e.clock.Now().Add(time.Hour)}); p.Outcome != orderpay.OutcomeUnknown {
		t.Fatalf("tampered precreate: %+v, want Unknown", p)
	}
	if r := ch.Refund(ctx, orderpay.RefundRequest{OutTradeNo: paid, OutRefundNo: paid + "R1", Amount: 100, Total: 700}); r.Outcome != orderpay.OutcomeUnknown {
		t.Fatalf("tampered refund: %+v, want Unknown", r)
	}
	// Untouched, the same calls give the real answers.
	same := newChannel(t, e.keys, proxy(t, e, func(b []byte) []byte { return b }).URL, func(c *wechat.Config) { c.Clock = e.clock })
	if q := same.Query(ctx, paid); q.Outcome != orderpay.OutcomePaid {
		t.Fatalf("untouched query: %+v", q)
	}
	if r := same.QueryRefund(ctx, paid, paid+"R1"); r.Outcome != orderpay.OutcomeRefunded || r.Amount != 100 {
		t.Fatalf("the tampered refund took effect all the same: %+v", r)
	}
}

// Every call fault on a refund leaves it Unknown, except the rate limit (429
// FREQUENCY_LIMITED: the refund was not accepted), which is RefundRetry; either way the same
// number sent again refunds exactly once.
func TestOutcomes_SimulatorFaultsOnRefundAreUnknownAndRetrySafe(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{sim.FaultTimeout, sim.FaultSystemError, sim.FaultRateLimited, sim.FaultUnsigned, sim.FaultBadSignature} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			ctx := context.Background()
			ch := newChannel(t, e.keys, e.srv.URL, func(c *wechat.Config) {
				c.Clock = e.clock
				if kind == sim.FaultTimeout {
					c.Timeout = 300 * time.Millisecond // the other faults answer, and must be seen answering
				}
			})
			no := e.paid(t, 500)
			applied := kind != sim.FaultRateLimited
			if err := e.sim.SetFaults(sim.FaultPlan{Rules: []sim.FaultRule{{Channel: "wechat", Method: sim.MethodRefund, Kind: kind, Applied: applied, Limit: 1}}}); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			r := ch.Refund(ctx, orderpay.RefundRequest{OutTradeNo: no, OutRefundNo: no + "R1", Amount: 500, Total: 500})
			want := orderpay.OutcomeUnknown
			if kind == sim.FaultRateLimited {
				want = orderpay.OutcomeRefundRetry
			}
			if r.Outcome != want || time.Since(start) > 5*time.Second {
				t.Fatalf("faulty refund: %+v after %v, want %s", r, time.Since(start), want)
			}
			if kind != sim.FaultTimeout && strings.Contains(r.Detail, "timeout") {
				t.Fatalf("faulty refund: %+v, want the fault's own answer, not a timeout", r)
			}
			if want := map[bool]int64{true: 500, false: 0}[applied]; e.ledger(t, no).Refunded != want {
				t.Fatalf("ledger refunded %d, want %d", e.ledger(t, no).Refunded, want)
			}
			// The retry goes through the adapter with its usual timeout: a busy machine must
			// not turn its slow answer into a false unknown.
			if r := e.ch.Refund(ctx, orderpay.RefundRequest{OutTradeNo: no, OutRefundNo: no + "R1", Amount: 500, Total: 500}); r.Outcome != orderpay.OutcomeRefunded {
				t.Fatalf("retry with the same number: %+v", r)
			}
			if got := e.ledger(t, no).Refunded; got != 500 {
				t.Fatalf("refunded %d after the retry, want exactly 500", got)
			}
		})
	}
}

func TestNew_RefusesIncompleteOrBadConfig(t *testing.T) {
	t.Parallel()
	keys, _ := simtest.Keys(t)
	good := channelConfig(t, keys, "")
	if ch, err := wechat.New(good); err != nil || ch.Name() != "wechat" {
		t.Fatalf("good config: %v", err)
	}
	for name, mod := range map[string]func(*wechat.Config){
		"no mchid":              func(c *wechat.Config) { c.MchID = "" },
		"no appid":              func(c *wechat.Config) { c.AppID = "" },
		"no serial":             func(c *wechat.Config) { c.MerchantSerial = "" },
		"no public key id":      func(c *wechat.Config) { c.PublicKeyID = "" },
		"garbage private key":   func(c *wechat.Config) { c.MerchantPrivateKeyPEM = "not a key" },
		"garbage public key":    func(c *wechat.Config) { c.PlatformPublicKeyPEM = "not a key" },
		"short APIv3 key":       func(c *wechat.Config) { c.APIv3Key = "0123456789" },
		"negative timeout":      func(c *wechat.Config) { c.Timeout = -time.Second },
		"base URL with a path":  func(c *wechat.Config) { c.BaseURL = "http://127.0.0.1:1/prefix" },
		"base URL not http(s)":  func(c *wechat.Config) { c.BaseURL = "ftp://127.0.0.1:1" },
		"public key as private": func(c *wechat.Config) { c.MerchantPrivateKeyPEM = c.PlatformPublicKeyPEM },
	} {
		cfg := good
		mod(&cfg)
		if _, err := wechat.New(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		} else if strings.Contains(err.Error(), "PRIVATE KEY-----") || strings.Contains(err.Error(), keys.Wechat.APIv3Key) {
			t.Errorf("%s: the error shows key material: %v", name, err)
		}
	}
}

func TestAck_Is204WithoutBody(t *testing.T) {
	t.Parallel()
	keys, _ := simtest.Keys(t)
	ack := newChannel(t, keys, "").Ack()
	if ack.Status != http.StatusNoContent || len(ack.Body) != 0 {
		t.Fatalf("ack %+v", ack)
	}
}
