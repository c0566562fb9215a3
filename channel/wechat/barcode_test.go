package wechat_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/channel/sim/simtest"
	"orderpay/channel/wechat"
)

// Barcode payments (docs/channels.md §F3) told against the simulator, whose wallet issues
// payment codes with the way their buyer behaves, for a merchant in each mode (public key,
// platform certificates): every answer the adapter reads is verified.

// wxModes are the merchant's two modes, each with the simulator's and the adapter's setting.
var wxModes = []struct {
	name    string
	sim     func(*sim.Config)
	adapter func(*wechat.Config)
}{
	{"public_key", func(*sim.Config) {}, func(*wechat.Config) {}},
	{"platform_certificate", simCertificateMode, certificateMode},
}

// setupMode is setup with the simulator and e.ch in the mode, and simMods applied.
func setupMode(t *testing.T, mode int, simMods ...func(*sim.Config)) *env {
	t.Helper()
	m := wxModes[mode]
	e := setup(t, append([]func(*sim.Config){m.sim}, simMods...)...)
	e.ch = newChannel(t, e.keys, e.srv.URL, m.adapter, func(c *wechat.Config) { c.Clock = e.clock })
	return e
}

func eachWxMode(t *testing.T, f func(t *testing.T, mode int)) {
	for i, m := range wxModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			f(t, i)
		})
	}
}

// code issues a payment code of the simulated WeChat wallet.
func (e *env) code(t *testing.T, behaviour string, after time.Duration) string {
	t.Helper()
	c, err := e.sim.IssueCode(orderpay.ChannelWechat, "bob", behaviour, after)
	if err != nil {
		t.Fatalf("IssueCode %s: %v", behaviour, err)
	}
	return c.AuthCode
}

// barcodeReq is a till's payment of amount with code, at store S-01 from 10.0.0.7.
func (e *env) barcodeReq(outTradeNo string, amount int64, code string) orderpay.PrecreateRequest {
	return orderpay.PrecreateRequest{OutTradeNo: outTradeNo, Amount: amount, Subject: "柜台 " + outTradeNo,
		Deadline: e.clock.Now().Add(15 * time.Minute), Method: orderpay.MethodBarcode, AuthCode: code,
		StoreID: "S-01", TillID: "T1", ClientIP: "10.0.0.7"}
}

func (e *env) pay(t *testing.T, ch *wechat.Channel, outTradeNo string, amount int64, code string) orderpay.PrecreateResult {
	t.Helper()
	return ch.Precreate(context.Background(), e.barcodeReq(outTradeNo, amount, code))
}

// reverse reverses outTradeNo, ordered at orderedAt, through the adapter as a Reverser.
func reverse(ch orderpay.Channel, outTradeNo string, orderedAt time.Time) orderpay.ReverseResult {
	return ch.(orderpay.Reverser).Reverse(context.Background(), orderpay.ReverseRequest{OutTradeNo: outTradeNo, OrderedAt: orderedAt})
}

// Every buyer's behaviour, in both modes: confirm is Paid by the call; password and
// wrong_password are Unknown (USERPAYING), NotPaid to a query, then Paid once the buyer has
// typed; short is Rejected BALANCE and its order ended unpaid (Closed); a used, an expired
// and an unknown code are Rejected CODE_USED, CODE_EXPIRED and CODE_INVALID; an Alipay code
// is Rejected unsent. The reverse of the paid order is Closed without saying it refunded
// (RefundKnown false), and it did: the ledger shows the refund.
func TestBarcode_EachBuyer(t *testing.T) {
	t.Parallel()
	eachWxMode(t, func(t *testing.T, mode int) {
		e := setupMode(t, mode, func(c *sim.Config) { c.RefundDelay = time.Second })
		ctx := context.Background()
		start := e.clock.Now()

		confirmCode := e.code(t, sim.CodeConfirm, 0)
		okNo := tradeNo("BC")
		res := e.pay(t, e.ch, okNo, 1234, confirmCode)
		if res.Outcome != orderpay.OutcomePaid || res.Refusal != "" || !strings.Contains(res.Detail, "HTTP 200 SUCCESS") || res.Raw == "" {
			t.Fatalf("confirm: %+v, want Paid", res)
		}
		if q := e.ch.Query(ctx, okNo); q.Outcome != orderpay.OutcomePaid || q.Amount != 1234 || q.TradeNo == "" {
			t.Fatalf("query after confirm: %+v", q)
		}
		if l := e.ledger(t, okNo); l.Method != orderpay.MethodBarcode || l.Amount != 1234 {
			t.Fatalf("ledger: %+v, want a barcode trade", l)
		}

		var waiting []string
		for _, beh := range []string{sim.CodePassword, sim.CodeWrongPassword} {
			no := tradeNo("BW")
			waiting = append(waiting, no)
			res := e.pay(t, e.ch, no, 500, e.code(t, beh, 10*time.Second))
			if res.Outcome != orderpay.OutcomeUnknown || !strings.Contains(res.Detail, "USERPAYING") {
				t.Fatalf("%s: %+v, want Unknown (USERPAYING)", beh, res)
			}
			if q := e.ch.Query(ctx, no); q.Outcome != orderpay.OutcomeNotPaid || !strings.Contains(q.Detail, "USERPAYING") {
				t.Fatalf("%s: query before the buyer types: %+v, want NotPaid", beh, q)
			}
		}
		e.clock.Advance(10 * time.Second)
		for _, no := range waiting {
			if q := e.ch.Query(ctx, no); q.Outcome != orderpay.OutcomePaid || q.Amount != 500 {
				t.Fatalf("%s: query after the buyer typed: %+v, want Paid", no, q)
			}
		}

		shortNo := tradeNo("BS")
		res = e.pay(t, e.ch, shortNo, 800, e.code(t, sim.CodeShort, 0))
		if res.Outcome != orderpay.OutcomeRejected || res.Refusal != orderpay.RefusalBalance || !strings.Contains(res.Detail, "NOTENOUGH") {
			t.Fatalf("short: %+v, want Rejected BALANCE", res)
		}
		if q := e.ch.Query(ctx, shortNo); q.Outcome != orderpay.OutcomeClosed || !strings.Contains(q.Detail, "PAYERROR") {
			t.Fatalf("short: query: %+v, want Closed (PAYERROR)", q)
		}

		if res := e.pay(t, e.ch, tradeNo("BU"), 100, confirmCode); res.Outcome != orderpay.OutcomeRejected || res.Refusal != orderpay.RefusalCodeUsed {
			t.Fatalf("a used code: %+v, want Rejected CODE_USED", res)
		}
		stale := e.code(t, sim.CodeConfirm, 0)
		e.clock.Advance(sim.DefaultPayCodeLifetime)
		if res := e.pay(t, e.ch, tradeNo("BE"), 100, stale); res.Outcome != orderpay.OutcomeRejected || res.Refusal != orderpay.RefusalCodeExpired ||
			!strings.Contains(res.Detail, "AUTHCODEEXPIRE") {
			t.Fatalf("an expired code: %+v, want Rejected CODE_EXPIRED", res)
		}
		if res := e.pay(t, e.ch, tradeNo("BI"), 100, "134567890123456789"); res.Outcome != orderpay.OutcomeRejected || res.Refusal != orderpay.RefusalCodeInvalid ||
			!strings.Contains(res.Detail, "AUTH_CODE_INVALID") {
			t.Fatalf("a code the wallet never issued: %+v, want Rejected CODE_INVALID", res)
		}
		if res := e.pay(t, e.ch, tradeNo("BA"), 100, "284567890123456789"); res.Outcome != orderpay.OutcomeRejected || res.Refusal != orderpay.RefusalCodeInvalid ||
			!strings.HasPrefix(res.Detail, "not sent") || res.Raw != "" {
			t.Fatalf("an Alipay code: %+v, want Rejected unsent", res)
		}

		// The reverse of the paid order: Closed, and WeChat does not say it refunded; the
		// ledger shows it did, and a query no longer says Paid.
		r := reverse(e.ch, okNo, start)
		if r.Outcome != orderpay.OutcomeClosed || r.RefundKnown || r.Refunded || r.Raw == "" {
			t.Fatalf("reverse of the paid order: %+v, want Closed, refund not known", r)
		}
		if r := reverse(e.ch, okNo, start); r.Outcome != orderpay.OutcomeClosed {
			t.Fatalf("reverse again: %+v, want Closed", r)
		}
		e.clock.Advance(time.Second)
		if l := e.ledger(t, okNo); l.Refunded != 1234 || l.Status != "REVOKED" {
			t.Fatalf("ledger after the reverse: %+v, want REVOKED and refunded", l)
		}
		if q := e.ch.Query(ctx, okNo); q.Outcome != orderpay.OutcomeUnknown || !strings.Contains(q.Detail, "REVOKED") {
			t.Fatalf("query of the reversed paid order: %+v, want Unknown", q)
		}
	})
}

// A buyer who never confirms, with the codepay's USERPAYING answered under 202 and under 200
// (which one WeChat uses is unverified): Unknown either way. The reverse is RefundRetry
// unsent within 15 s of the order by the adapter's clock, RefundRetry from WeChat within 15 s
// by WeChat's (INVALID_REQUEST) and while the buyer's dialog is open (USERPAYING); once the
// order has ended PAYERROR (Closed to a query) it is Closed, and the order is REVOKED, Closed
// too: the buyer cannot pay it any more.
func TestBarcode_NeverConfirmed(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusAccepted, http.StatusOK} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			t.Parallel()
			eachWxMode(t, func(t *testing.T, mode int) {
				e := setupMode(t, mode, func(c *sim.Config) { c.WechatUserPayingStatus = status })
				ctx := context.Background()
				no, code := tradeNo("BN"), e.code(t, sim.CodeNever, 0)
				ordered := e.clock.Now()
				res := e.pay(t, e.ch, no, 700, code)
				if res.Outcome != orderpay.OutcomeUnknown || !strings.Contains(res.Detail, "HTTP "+strconv.Itoa(status)+" USERPAYING") {
					t.Fatalf("never: %+v, want Unknown (HTTP %d USERPAYING)", res, status)
				}

				r := reverse(e.ch, no, ordered)
				if r.Outcome != orderpay.OutcomeRefundRetry || !strings.HasPrefix(r.Detail, "not sent") || r.Raw != "" {
					t.Fatalf("reverse at once: %+v, want RefundRetry unsent", r)
				}
				// WeChat's own clock says the same (the adapter was told an older order time).
				r = reverse(e.ch, no, ordered.Add(-time.Minute))
				if r.Outcome != orderpay.OutcomeRefundRetry || !strings.Contains(r.Detail, "INVALID_REQUEST") || r.Raw == "" {
					t.Fatalf("reverse WeChat finds too soon: %+v, want RefundRetry", r)
				}
				e.clock.Advance(orderpay.WechatReverseAfter)
				r = reverse(e.ch, no, ordered)
				if r.Outcome != orderpay.OutcomeRefundRetry || !strings.Contains(r.Detail, "USERPAYING") {
					t.Fatalf("reverse while the buyer is paying: %+v, want RefundRetry", r)
				}
				if q := e.ch.Query(ctx, no); q.Outcome != orderpay.OutcomeNotPaid {
					t.Fatalf("query while the dialog is open: %+v, want NotPaid", q)
				}

				e.clock.Advance(sim.DefaultWechatUserPayingFor)
				if q := e.ch.Query(ctx, no); q.Outcome != orderpay.OutcomeClosed || !strings.Contains(q.Detail, "PAYERROR") {
					t.Fatalf("query after the dialog closed: %+v, want Closed (PAYERROR)", q)
				}
				r = reverse(e.ch, no, ordered)
				if r.Outcome != orderpay.OutcomeClosed || r.RefundKnown || r.Refunded {
					t.Fatalf("reverse after PAYERROR: %+v, want Closed", r)
				}
				if q := e.ch.Query(ctx, no); q.Outcome != orderpay.OutcomeClosed || !strings.Contains(q.Detail, "REVOKED") {
					t.Fatalf("query after the reverse: %+v, want Closed (REVOKED)", q)
				}
				if _, err := e.sim.ConfirmCode(code); err == nil {
					t.Fatal("the buyer paid a reversed order")
				}
				if l := e.ledger(t, no); !l.PaidAt.IsZero() || l.Refunded != 0 {
					t.Fatalf("ledger: %+v, want nothing paid", l)
				}
			})
		})
	}
}

// A password buyer whose answer comes under 200 or 202 is Unknown, then Paid to a query;
// reversed before they confirm (the dialog still open) it is RefundRetry, and the payment
// that follows is found by the query.
func TestBarcode_PasswordUnderEitherStatus(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusAccepted, http.StatusOK} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			t.Parallel()
			e := setup(t, func(c *sim.Config) { c.WechatUserPayingStatus = status })
			no, ordered := tradeNo("BP"), e.clock.Now()
			if res := e.pay(t, e.ch, no, 300, e.code(t, sim.CodePassword, 20*time.Second)); res.Outcome != orderpay.OutcomeUnknown {
				t.Fatalf("password: %+v, want Unknown", res)
			}
			e.clock.Advance(15 * time.Second)
			if r := reverse(e.ch, no, ordered); r.Outcome != orderpay.OutcomeRefundRetry {
				t.Fatalf("reverse while typing: %+v, want RefundRetry", r)
			}
			e.clock.Advance(5 * time.Second)
			if q := e.ch.Query(context.Background(), no); q.Outcome != orderpay.OutcomePaid || q.Amount != 300 {
				t.Fatalf("query after the buyer typed: %+v, want Paid", q)
			}
		})
	}
}

// The reverse of an order WeChat never got (404) ends it, nothing held; its refusals for good, from the simulator: a
// Native order (INVALID_REQUEST: close it instead), a paid order already refunded
// (TRADE_ERROR), one 7 days old (REVERSE_EXPIRE), each Rejected: a person must look.
func TestBarcode_ReverseRefusals(t *testing.T) {
	t.Parallel()
	eachWxMode(t, func(t *testing.T, mode int) {
		e := setupMode(t, mode)
		long := e.clock.Now().Add(-time.Hour)
		if r := reverse(e.ch, tradeNo("RN"), long); r.Outcome != orderpay.OutcomeClosed || !r.RefundKnown || r.Refunded || !strings.Contains(r.Detail, "ORDER_NOT_EXIST") {
			t.Fatalf("reverse of an order WeChat never got: %+v, want Closed, nothing refunded", r)
		}
		native := e.paid(t, 100)
		if r := reverse(e.ch, native, long); r.Outcome != orderpay.OutcomeRejected || !strings.Contains(r.Detail, "INVALID_REQUEST") {
			t.Fatalf("reverse of a Native order: %+v, want Rejected", r)
		}
		refunded := tradeNo("RR")
		if res := e.pay(t, e.ch, refunded, 500, e.code(t, sim.CodeConfirm, 0)); res.Outcome != orderpay.OutcomePaid {
			t.Fatalf("pay: %+v", res)
		}
		old := tradeNo("RO")
		if res := e.pay(t, e.ch, old, 500, e.code(t, sim.CodeConfirm, 0)); res.Outcome != orderpay.OutcomePaid {
			t.Fatalf("pay: %+v", res)
		}
		if r := e.ch.Refund(context.Background(), orderpay.RefundRequest{OutTradeNo: refunded, OutRefundNo: refunded + "R", Amount: 100, Total: 500}); r.Outcome == orderpay.OutcomeUnknown {
			t.Fatalf("refund: %+v", r)
		}
		e.clock.Advance(orderpay.WechatReverseAfter)
		if r := reverse(e.ch, refunded, long); r.Outcome != orderpay.OutcomeRejected || !strings.Contains(r.Detail, "TRADE_ERROR") {
			t.Fatalf("reverse of a refunded order: %+v, want Rejected", r)
		}
		e.clock.Advance(7 * 24 * time.Hour)
		if r := reverse(e.ch, old, long); r.Outcome != orderpay.OutcomeRejected || !strings.Contains(r.Detail, "REVERSE_EXPIRE") {
			t.Fatalf("reverse after 7 days: %+v, want Rejected", r)
		}
		if l := e.ledger(t, old); l.Refunded != 0 || l.Status != "SUCCESS" {
			t.Fatalf("ledger of the old order: %+v, want paid, untouched", l)
		}
	})
}

// recorder forwards calls to the simulator and keeps each codepay body and its headers.
type recorder struct {
	mu      sync.Mutex
	bodies  []map[string]any
	headers []http.Header
	paths   []string
}

func (rec *recorder) proxy(t *testing.T, e *env) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m map[string]any
		_ = json.Unmarshal(body, &m)
		rec.mu.Lock()
		rec.bodies, rec.headers, rec.paths = append(rec.bodies, m), append(rec.headers, r.Header.Clone()), append(rec.paths, r.URL.Path)
		rec.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		e.sim.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// What codepay and reverse carry: the main appid, the mchid, the description, out_trade_no,
// payer.auth_code, amount in CNY, scene_info with the till's address and the store, signed
// by the SDK; no notify_url, no time_expire. A store name WeChat would not take is left
// out and said so; requests WeChat would refuse on their face are not sent.
func TestBarcode_TheCalls(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var rec recorder
	ch := newChannel(t, e.keys, rec.proxy(t, e).URL, func(c *wechat.Config) { c.Clock = e.clock })
	no := tradeNo("BT")
	req := e.barcodeReq(no, 990, e.code(t, sim.CodeConfirm, 0))
	req.NotifyURL = "https://shop.example/notify" // never sent with a barcode payment
	if res := ch.Precreate(context.Background(), req); res.Outcome != orderpay.OutcomePaid {
		t.Fatalf("pay: %+v", res)
	}
	body, path := rec.bodies[0], rec.paths[0]
	got, _ := json.Marshal(body)
	want := `{"amount":{"currency":"CNY","total":990},"appid":"` + e.keys.Wechat.AppID + `","description":"柜台 ` + no +
		`","mchid":"` + e.keys.Wechat.MchID + `","out_trade_no":"` + no + `","payer":{"auth_code":"` + req.AuthCode +
		`"},"scene_info":{"device_ip":"10.0.0.7","store_info":{"out_id":"S-01"}}}`
	if path != "/v3/pay/transactions/codepay" || string(got) != want {
		t.Errorf("codepay %s %s,\nwant %s", path, got, want)
	}
	if a := rec.headers[0].Get("Authorization"); !strings.HasPrefix(a, "WECHATPAY2-SHA256-RSA2048 ") || !strings.Contains(a, `serial_no="`+e.keys.Wechat.MerchantSerial+`"`) {
		t.Errorf("Authorization %q: not signed by the SDK", a)
	}

	// No store, or one WeChat would refuse: no store_info.
	for i, store := range []string{"", "shop.one"} {
		req := e.barcodeReq(tradeNo("BT"), 100, e.code(t, sim.CodeConfirm, 0))
		req.StoreID = store
		res := ch.Precreate(context.Background(), req)
		if res.Outcome != orderpay.OutcomePaid || (store != "") != strings.Contains(res.Detail, "store_info.out_id not sent") {
			t.Fatalf("store %q: %+v", store, res)
		}
		if si := rec.bodies[1+i]["scene_info"].(map[string]any); si["store_info"] != nil || si["device_ip"] != "10.0.0.7" {
			t.Errorf("store %q: scene_info %v, want no store_info", store, si)
		}
	}

	e.clock.Advance(orderpay.WechatReverseAfter)
	if r := reverse(ch, no, e.clock.Now().Add(-time.Minute)); r.Outcome != orderpay.OutcomeClosed {
		t.Fatalf("reverse: %+v", r)
	}
	got, _ = json.Marshal(rec.bodies[3])
	if rec.paths[3] != "/v3/pay/transactions/out-trade-no/"+no+"/reverse" ||
		string(got) != `{"appid":"`+e.keys.Wechat.AppID+`","mchid":"`+e.keys.Wechat.MchID+`"}` {
		t.Errorf("reverse %s %s", rec.paths[3], got)
	}

	calls := len(rec.paths)
	for name, mod := range map[string]func(*orderpay.PrecreateRequest){
		"deadline passed":        func(r *orderpay.PrecreateRequest) { r.Deadline = e.clock.Now().Add(-time.Second) },
		"no deadline":            func(r *orderpay.PrecreateRequest) { r.Deadline = time.Time{} },
		"no code":                func(r *orderpay.PrecreateRequest) { r.AuthCode = "" },
		"no till address":        func(r *orderpay.PrecreateRequest) { r.ClientIP = "" },
		"a till name as address": func(r *orderpay.PrecreateRequest) { r.ClientIP = "till-3" },
		"short out_trade_no":     func(r *orderpay.PrecreateRequest) { r.OutTradeNo = "B1" },
		"no subject":             func(r *orderpay.PrecreateRequest) { r.Subject = " " },
	} {
		r := e.barcodeReq(tradeNo("BX"), 100, "134567890123456789")
		mod(&r)
		if res := ch.Precreate(context.Background(), r); res.Outcome != orderpay.OutcomeRejected || !strings.HasPrefix(res.Detail, "not sent") || res.Refusal == "" {
			t.Errorf("%s: %+v, want Rejected unsent with a refusal", name, res)
		}
	}
	if r := reverse(ch, "B1", time.Time{}); r.Outcome != orderpay.OutcomeRejected || !strings.HasPrefix(r.Detail, "not sent") {
		t.Errorf("reverse of a bad number: %+v, want Rejected unsent", r)
	}
	if len(rec.paths) != calls {
		t.Errorf("%d calls sent for requests refused unsent: %v", len(rec.paths)-calls, rec.paths[calls:])
	}
}

// Every answer codepay and reverse can give, signed or not, through a fake WeChat Pay: the
// outcome and the refusal class of each.
func TestBarcode_Answers(t *testing.T) {
	t.Parallel()
	keys, forger := simtest.Keys(t)
	mch, app := keys.Wechat.MchID, keys.Wechat.AppID
	const no = "BA_000001"
	txn := func(state, extra string) string {
		return `{"appid":"` + app + `","mchid":"` + mch + `","out_trade_no":"` + no + `","trade_type":"MICROPAY","trade_state":"` + state + `"` + extra + `}`
	}
	const paid = `,"transaction_id":"4200000000202503141234567890","success_time":"2025-03-14T10:00:00+08:00","amount":{"total":300,"payer_total":300,"currency":"CNY"}`
	userPaying := `{"out_trade_no":"` + no + `","trade_state":"USERPAYING","trade_state_desc":"用户支付中（需要输入密码）"}`
	fail := func(status int, code, msg string) fakeAnswer {
		return fakeAnswer{status: status, body: `{"code":"` + code + `","message":"` + msg + `"}`}
	}
	req := orderpay.PrecreateRequest{OutTradeNo: no, Amount: 300, Subject: "x", Deadline: time.Now().Add(time.Hour),
		Method: orderpay.MethodBarcode, AuthCode: "134567890123456789", ClientIP: "10.0.0.7"}
	for _, tc := range []struct {
		name    string
		a       fakeAnswer
		want    orderpay.Outcome
		refusal orderpay.BarcodeRefusal
	}{
		{"200 SUCCESS", fakeAnswer{status: 200, body: txn("SUCCESS", paid), sign: true}, orderpay.OutcomePaid, ""},
		{"202 SUCCESS", fakeAnswer{status: 202, body: txn("SUCCESS", paid), sign: true}, orderpay.OutcomeUnknown, ""},
		{"200 USERPAYING", fakeAnswer{status: 200, body: userPaying, sign: true}, orderpay.OutcomeUnknown, ""},
		{"202 USERPAYING", fakeAnswer{status: 202, body: userPaying, sign: true}, orderpay.OutcomeUnknown, ""},
		{"200 PAYERROR", fakeAnswer{status: 200, body: txn("PAYERROR", ""), sign: true}, orderpay.OutcomeUnknown, ""},
		{"200 no state", fakeAnswer{status: 200, body: `{}`, sign: true}, orderpay.OutcomeUnknown, ""},
		{"200 not JSON", fakeAnswer{status: 200, body: `<html>`, sign: true}, orderpay.OutcomeUnknown, ""},
		{"SUCCESS for another out_trade_no", fakeAnswer{status: 200, body: strings.Replace(txn("SUCCESS", paid), no, "BA_000002", 1), sign: true}, orderpay.OutcomeUnknown, ""},
		{"SUCCESS for another mchid", fakeAnswer{status: 200, body: strings.Replace(txn("SUCCESS", paid), mch, "1900000109", 1), sign: true}, orderpay.OutcomeUnknown, ""},
		{"SUCCESS for another appid", fakeAnswer{status: 200, body: strings.Replace(txn("SUCCESS", paid), app, keys.Wechat.MiniAppID, 1), sign: true}, orderpay.OutcomeUnknown, ""},
		{"SUCCESS for another amount", fakeAnswer{status: 200, body: strings.Replace(txn("SUCCESS", paid), `"total":300`, `"total":299`, 1), sign: true}, orderpay.OutcomeUnknown, ""},
		{"SUCCESS without amount", fakeAnswer{status: 200, body: txn("SUCCESS", `,"transaction_id":"1"`), sign: true}, orderpay.OutcomeUnknown, ""},
		{"SUCCESS unsigned", fakeAnswer{status: 200, body: txn("SUCCESS", paid)}, orderpay.OutcomeUnknown, ""},
		{"SUCCESS signed by a forger", fakeAnswer{status: 200, body: txn("SUCCESS", paid), sign: true, signKey: forger}, orderpay.OutcomeUnknown, ""},
		{"SUCCESS signed 6 minutes ago", fakeAnswer{status: 200, body: txn("SUCCESS", paid), sign: true, at: time.Now().Add(-6 * time.Minute)}, orderpay.OutcomeUnknown, ""},
		{"400 USERPAYING", fail(400, "USERPAYING", "需要用户输入支付密码"), orderpay.OutcomeUnknown, ""},
		{"403 USERPAYING", fail(403, "USERPAYING", "需要用户输入支付密码"), orderpay.OutcomeUnknown, ""},
		{"500 SYSTEM_ERROR", fail(500, "SYSTEM_ERROR", "系统错误"), orderpay.OutcomeUnknown, ""},
		{"500 BANKERROR", fail(500, "BANKERROR", "银行系统异常"), orderpay.OutcomeUnknown, ""},
		{"400 SYSTEMERROR", fail(400, "SYSTEMERROR", "系统超时"), orderpay.OutcomeUnknown, ""},
		{"403 BANKERROR", fail(403, "BANKERROR", "银行系统异常"), orderpay.OutcomeUnknown, ""},
		{"429 FREQUENCY_LIMITED", fail(429, "FREQUENCY_LIMITED", "频率超限"), orderpay.OutcomeUnknown, ""},
		{"502 HTML", fakeAnswer{status: 502, body: "<html>Bad Gateway</html>"}, orderpay.OutcomeUnknown, ""},
		{"400 ORDERPAID", fail(400, "ORDERPAID", "订单已支付"), orderpay.OutcomeUnknown, ""},
		{"403 OUT_TRADE_NO_USED", fail(403, "OUT_TRADE_NO_USED", "商户订单号重复"), orderpay.OutcomeUnknown, ""},
		{"400 INVALID_REQUEST 订单号重复", fail(400, "INVALID_REQUEST", "201 商户订单号重复"), orderpay.OutcomeUnknown, ""},
		{"403 NOTENOUGH", fail(403, "NOTENOUGH", "用户余额不足，请用户换卡支付"), orderpay.OutcomeRejected, orderpay.RefusalBalance},
		{"403 NOT_ENOUGH", fail(403, "NOT_ENOUGH", "余额不足"), orderpay.OutcomeRejected, orderpay.RefusalBalance},
		{"403 NOTSUPORTCARD", fail(403, "NOTSUPORTCARD", "不支持卡类型"), orderpay.OutcomeRejected, orderpay.RefusalBalance},
		{"403 RULELIMIT", fail(403, "RULELIMIT", "交易金额超过限额"), orderpay.OutcomeRejected, orderpay.RefusalBalance},
		{"400 AUTHCODEEXPIRE", fail(400, "AUTHCODEEXPIRE", "二维码已过期，请用户在微信上刷新后再试"), orderpay.OutcomeRejected, orderpay.RefusalCodeExpired},
		{"400 AUTH_CODE_INVALID used", fail(400, "AUTH_CODE_INVALID", "101 每个二维码仅限使用一次，请刷新再试"), orderpay.OutcomeRejected, orderpay.RefusalCodeUsed},
		{"400 AUTH_CODE_INVALID", fail(400, "AUTH_CODE_INVALID", "101 付款码无效，请重新扫码"), orderpay.OutcomeRejected, orderpay.RefusalCodeInvalid},
		{"400 AUTH_CODE_ERROR", fail(400, "AUTH_CODE_ERROR", "授权码参数错误"), orderpay.OutcomeRejected, orderpay.RefusalCodeInvalid},
		{"403 TRADE_ERROR", fail(403, "TRADE_ERROR", "交易错误"), orderpay.OutcomeRejected, orderpay.RefusalRisk},
		{"400 BUYER_MISMATCH", fail(400, "BUYER_MISMATCH", "支付帐号错误"), orderpay.OutcomeRejected, orderpay.RefusalOther},
		{"400 ORDER_CLOSED", fail(400, "ORDER_CLOSED", "订单已关闭"), orderpay.OutcomeRejected, orderpay.RefusalOther},
		{"400 ORDERREVERSED", fail(400, "ORDERREVERSED", "订单已撤销"), orderpay.OutcomeRejected, orderpay.RefusalOther},
		{"400 PARAM_ERROR", fail(400, "PARAM_ERROR", "参数错误"), orderpay.OutcomeRejected, orderpay.RefusalOther},
		{"401 SIGN_ERROR", fail(401, "SIGN_ERROR", "签名错误"), orderpay.OutcomeRejected, orderpay.RefusalOther},
		{"400 APPID_MCHID_NOT_MATCH", fail(400, "APPID_MCHID_NOT_MATCH", "appid和mch_id不匹配"), orderpay.OutcomeRejected, orderpay.RefusalOther},
	} {
		ch := newChannel(t, keys, fakeWechat(t, keys, tc.a).URL)
		res := ch.Precreate(context.Background(), req)
		if res.Outcome != tc.want || res.Refusal != tc.refusal {
			t.Errorf("codepay %s: %s %q (%s), want %s %q", tc.name, res.Outcome, res.Refusal, res.Detail, tc.want, tc.refusal)
		}
	}

	reversed := `{"appid":"` + app + `","mchid":"` + mch + `","out_trade_no":"` + no + `"}`
	for _, tc := range []struct {
		name string
		a    fakeAnswer
		want orderpay.Outcome
	}{
		{"200", fakeAnswer{status: 200, body: reversed, sign: true}, orderpay.OutcomeClosed},
		{"200 empty object", fakeAnswer{status: 200, body: `{}`, sign: true}, orderpay.OutcomeClosed},
		{"204", fakeAnswer{status: 204, sign: true}, orderpay.OutcomeClosed},
		{"200 for another out_trade_no", fakeAnswer{status: 200, body: strings.Replace(reversed, no, "BA_000002", 1), sign: true}, orderpay.OutcomeUnknown},
		{"200 for another mchid", fakeAnswer{status: 200, body: strings.Replace(reversed, mch, "1900000109", 1), sign: true}, orderpay.OutcomeUnknown},
		{"200 for another appid", fakeAnswer{status: 200, body: strings.Replace(reversed, app, keys.Wechat.MiniAppID, 1), sign: true}, orderpay.OutcomeUnknown},
		{"200 not JSON", fakeAnswer{status: 200, body: `<html>`, sign: true}, orderpay.OutcomeUnknown},
		{"200 unsigned", fakeAnswer{status: 200, body: reversed}, orderpay.OutcomeUnknown},
		{"200 signed by a forger", fakeAnswer{status: 200, body: reversed, sign: true, signKey: forger}, orderpay.OutcomeUnknown},
		{"403 USERPAYING", fail(403, "USERPAYING", "用户正在支付中，正在支付中不能发起撤销，请稍后再试"), orderpay.OutcomeRefundRetry},
		{"400 INVALID_REQUEST within 15 s", fail(400, "INVALID_REQUEST", "订单创建15秒内不能撤销，请稍后再试"), orderpay.OutcomeRefundRetry},
		{"400 INVALID_REQUEST not a barcode order", fail(400, "INVALID_REQUEST", "非付款码订单不能撤销，请调用关闭订单"), orderpay.OutcomeRejected},
		{"400 REVERSE_EXPIRE", fail(400, "REVERSE_EXPIRE", "订单已超过7天，不能撤销，请使用退款"), orderpay.OutcomeRejected},
		{"403 TRADE_ERROR", fail(403, "TRADE_ERROR", "订单已发生退款，不能撤销，请使用退款"), orderpay.OutcomeRejected},
		{"404 ORDER_NOT_EXIST", fail(404, "ORDER_NOT_EXIST", "订单不存在"), orderpay.OutcomeClosed},
		{"500 SYSTEM_ERROR", fail(500, "SYSTEM_ERROR", "系统错误"), orderpay.OutcomeUnknown},
		{"400 SYSTEMERROR", fail(400, "SYSTEMERROR", "系统超时"), orderpay.OutcomeUnknown},
		{"429 FREQUENCY_LIMITED", fail(429, "FREQUENCY_LIMITED", "频率超限"), orderpay.OutcomeUnknown},
	} {
		ch := newChannel(t, keys, fakeWechat(t, keys, tc.a).URL)
		r := reverse(ch, no, time.Now().Add(-time.Minute))
		// Only "no such order" tells whether money moved (none did); a reverse's 2xx does not.
		wantKnown := tc.name == "404 ORDER_NOT_EXIST"
		if r.Outcome != tc.want || r.Refunded || r.RefundKnown != wantKnown {
			t.Errorf("reverse %s: %+v, want %s, refund known %v", tc.name, r, tc.want, wantKnown)
		}
	}
}

// wxCallFaults are the simulator's call faults on a WeChat payment or reverse, each with
// whether the operation takes effect.
var wxCallFaults = []struct {
	kind    string
	applied bool
}{
	{sim.FaultTimeout, true},
	{sim.FaultTimeout, false},
	{sim.FaultHTTP500, true},
	{sim.FaultHTTP500, false},
	{sim.FaultSystemError, true},
	{sim.FaultSystemError, false},
	{sim.FaultUnsigned, true},
	{sim.FaultUnsigned, false}, // a success WeChat never sent, unsigned
	{sim.FaultBadSignature, true},
	{sim.FaultBadSignature, false}, // a forged success
	{sim.FaultRateLimited, false},
}

func wxFaultName(kind string, applied bool) string {
	if applied {
		return kind + " applied"
	}
	return kind + " not applied"
}

// faulty is an adapter in the mode that gives up after 300 ms, for a call under a timeout
// fault; e.ch otherwise.
func (e *env) faulty(t *testing.T, mode int, kind string) *wechat.Channel {
	if kind != sim.FaultTimeout {
		return e.ch
	}
	return newChannel(t, e.keys, e.srv.URL, wxModes[mode].adapter, func(c *wechat.Config) {
		c.Clock = e.clock
		c.Timeout = 300 * time.Millisecond
	})
}

func (e *env) fault(t *testing.T, method, kind string, applied bool) {
	t.Helper()
	if err := e.sim.SetFaults(sim.FaultPlan{Seed: 1, Rules: []sim.FaultRule{
		{Channel: orderpay.ChannelWechat, Method: method, Kind: kind, Applied: applied},
	}}); err != nil {
		t.Fatal(err)
	}
}

// Every call fault on the payment (and BANKERROR) is Unknown, never Paid nor Rejected, in
// both modes; the query then tells what happened: a fault with effect hides a payment the
// query finds, one without left no order (404: NotPaid).
func TestBarcode_PayFaultsAreUnknown(t *testing.T) {
	t.Parallel()
	faults := append(wxCallFaults[:len(wxCallFaults):len(wxCallFaults)],
		struct {
			kind    string
			applied bool
		}{sim.FaultBankError, true}, struct {
			kind    string
			applied bool
		}{sim.FaultBankError, false})
	for mode, m := range wxModes {
		for _, f := range faults {
			t.Run(m.name+"/"+wxFaultName(f.kind, f.applied), func(t *testing.T) {
				t.Parallel()
				e := setupMode(t, mode)
				no := tradeNo("BF")
				e.fault(t, sim.MethodPay, f.kind, f.applied)
				start := time.Now()
				if res := e.pay(t, e.faulty(t, mode, f.kind), no, 600, e.code(t, sim.CodeConfirm, 0)); res.Outcome != orderpay.OutcomeUnknown || res.Refusal != "" {
					t.Fatalf("pay: %+v, want Unknown", res)
				}
				if d := time.Since(start); f.kind == sim.FaultTimeout && d > 3*time.Second {
					t.Fatalf("took %v: the timeout did not bound the call", d)
				}
				_ = e.sim.SetFaults(sim.FaultPlan{})
				want := orderpay.OutcomeNotPaid
				if f.applied {
					want = orderpay.OutcomePaid
				}
				if q := e.ch.Query(context.Background(), no); q.Outcome != want {
					t.Fatalf("query: %+v, want %s", q, want)
				}
			})
		}
	}
}

// Every call fault on the reverse of a paid order is Unknown; the query then tells whether
// it took effect (reversed after the payment: Unknown, and refunded; or still Paid), and
// the reverse sent again ends it.
func TestBarcode_ReverseFaultsAreUnknown(t *testing.T) {
	t.Parallel()
	for _, f := range wxCallFaults {
		t.Run(wxFaultName(f.kind, f.applied), func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			no, ordered := tradeNo("BR"), e.clock.Now()
			if res := e.pay(t, e.ch, no, 600, e.code(t, sim.CodeConfirm, 0)); res.Outcome != orderpay.OutcomePaid {
				t.Fatalf("pay: %+v", res)
			}
			e.clock.Advance(orderpay.WechatReverseAfter)
			e.fault(t, sim.MethodReverse, f.kind, f.applied)
			if r := reverse(e.faulty(t, 0, f.kind), no, ordered); r.Outcome != orderpay.OutcomeUnknown {
				t.Fatalf("reverse: %+v, want Unknown", r)
			}
			_ = e.sim.SetFaults(sim.FaultPlan{})
			q := e.ch.Query(context.Background(), no)
			if f.applied && (q.Outcome != orderpay.OutcomeUnknown || !strings.Contains(q.Detail, "REVOKED")) ||
				!f.applied && q.Outcome != orderpay.OutcomePaid {
				t.Fatalf("query: %+v (reverse applied: %v)", q, f.applied)
			}
			if r := reverse(e.ch, no, ordered); r.Outcome != orderpay.OutcomeClosed {
				t.Fatalf("reverse again: %+v, want Closed", r)
			}
			if l := e.ledger(t, no); l.Status != "REVOKED" || len(l.Refunds) != 1 || l.Refunds[0].Amount != 600 {
				t.Fatalf("ledger: %+v, want REVOKED with one full refund", l)
			}
		})
	}
}
