package alipay_test

import (
	"bytes"
	"context"
	"crypto/rsa"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/alipay"
	"orderpay/channel/sim"
	"orderpay/channel/sim/simtest"
	"orderpay/clocktest"
)

var cst = time.FixedZone("CST", 8*3600)

// env is the adapter talking to a real simulator over loopback.
type env struct {
	sim   *sim.Simulator
	srv   *httptest.Server
	keys  *sim.Keys
	clock *clocktest.Clock
	ch    *alipay.Channel
}

func setup(t *testing.T) *env {
	t.Helper()
	keys, _ := simtest.Keys(t)
	clock := clocktest.New(time.Date(2025, 3, 14, 10, 0, 0, 0, cst))
	s, err := sim.New(sim.Config{
		Keys:      keys,
		Clock:     clock,
		TimeScale: 1e6,
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	e := &env{sim: s, srv: srv, keys: keys, clock: clock}
	e.ch = newChannel(t, keys, srv.URL+"/gateway.do", func(c *alipay.Config) { c.Clock = clock })
	return e
}

func newChannel(t *testing.T, keys *sim.Keys, gateway string, mods ...func(*alipay.Config)) *alipay.Channel {
	t.Helper()
	cfg := alipay.Config{
		AppID:              keys.AppID,
		SellerID:           keys.SellerID,
		AppPrivateKeyPEM:   simtest.PEM(t, keys.AppPrivateKeyPEM),
		AlipayPublicKeyPEM: simtest.PEM(t, keys.AlipayPublicKeyPEM),
		GatewayURL:         gateway,
	}
	for _, m := range mods {
		m(&cfg)
	}
	ch, err := alipay.New(cfg)
	if err != nil {
		t.Fatalf("alipay.New: %v", err)
	}
	return ch
}

func (e *env) precreate(t *testing.T, outTradeNo string, amount int64, deadline time.Time, notifyURL string) orderpay.PrecreateResult {
	t.Helper()
	return e.ch.Precreate(context.Background(), orderpay.PrecreateRequest{
		OutTradeNo: outTradeNo,
		Amount:     amount,
		Subject:    "订单 " + outTradeNo,
		Deadline:   deadline,
		NotifyURL:  notifyURL,
	})
}

// merchant is the merchant's notify endpoint: it verifies every notification with the
// adapter and answers with the adapter's Ack when it verifies.
type merchant struct {
	srv      *httptest.Server
	mu       sync.Mutex
	bodies   []string
	verified []*orderpay.Notification
	errs     []error
}

func newMerchant(t *testing.T, ch *alipay.Channel) *merchant {
	t.Helper()
	m := &merchant{}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		n, err := ch.VerifyNotification(r.Context(), r.Header, body)
		m.mu.Lock()
		m.bodies = append(m.bodies, string(body))
		m.verified = append(m.verified, n)
		m.errs = append(m.errs, err)
		m.mu.Unlock()
		if err != nil {
			http.Error(w, "fail", http.StatusBadRequest)
			return
		}
		ack := ch.Ack()
		w.Header().Set("Content-Type", ack.ContentType)
		w.WriteHeader(ack.Status)
		_, _ = w.Write(ack.Body)
	}))
	t.Cleanup(m.srv.Close)
	return m
}

// first waits for the first notification to arrive and returns its body, decoded result
// and error.
func (m *merchant) first(t *testing.T) (string, *orderpay.Notification, error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		m.mu.Lock()
		if len(m.bodies) > 0 {
			defer m.mu.Unlock()
			return m.bodies[0], m.verified[0], m.errs[0]
		}
		m.mu.Unlock()
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatal("no notification arrived")
	return "", nil, nil
}

func TestRoundTrip_PrecreatePayQueryAndVerifiedNotification(t *testing.T) {
	t.Parallel()
	e := setup(t)
	m := newMerchant(t, e.ch)
	deadline := e.clock.Now().Add(30 * time.Minute)

	pre := e.precreate(t, "RT_1", 1234, deadline, m.srv.URL+"/notify/alipay")
	if pre.Outcome != orderpay.OutcomeAccepted || !strings.HasPrefix(pre.QRCode, "https://qr.alipay.com/bax") {
		t.Fatalf("precreate: %+v", pre)
	}
	if !pre.QRExpiresAt.Equal(deadline) {
		t.Errorf("QRExpiresAt %v, want the deadline %v", pre.QRExpiresAt, deadline)
	}
	if !strings.Contains(pre.Raw, "alipay_trade_precreate_response") {
		t.Errorf("Raw does not hold the gateway answer: %q", pre.Raw)
	}

	if q := e.ch.Query(context.Background(), "RT_1"); q.Outcome != orderpay.OutcomeNotPaid {
		t.Fatalf("query before scan: %+v, want NotPaid", q)
	}

	e.clock.Advance(90 * time.Second)
	paid, err := e.sim.Pay(context.Background(), pre.QRCode)
	if err != nil {
		t.Fatal(err)
	}
	q := e.ch.Query(context.Background(), "RT_1")
	if q.Outcome != orderpay.OutcomePaid || q.Amount != 1234 || q.TradeNo != paid.TradeNo {
		t.Fatalf("query after pay: %+v, want Paid 1234 %s", q, paid.TradeNo)
	}
	if !q.PaidAt.Equal(e.clock.Now()) {
		t.Errorf("PaidAt %v, want %v", q.PaidAt, e.clock.Now())
	}

	body, n, err := m.first(t)
	if err != nil {
		t.Fatalf("the simulator's notification does not verify: %v", err)
	}
	if n.Outcome != orderpay.OutcomePaid || n.Amount != 1234 || n.OutTradeNo != "RT_1" || n.TradeNo != paid.TradeNo ||
		n.Channel != orderpay.ChannelAlipay || n.NotifyID == "" || n.Raw != body || !n.PaidAt.Equal(e.clock.Now()) {
		t.Errorf("notification %+v", n)
	}
	// The adapter's Ack is what Alipay accepts: one attempt, acknowledged.
	deadlineWait := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadlineWait) {
		if st := e.sim.NotifyStats(); len(st) == 1 && st[0].Done() {
			if !st[0].Acked || len(st[0].Attempts) != 1 {
				t.Fatalf("delivery %+v, want acknowledged on the first attempt", st[0])
			}
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatal("notification never settled")
}

func TestPrecreate_QRExpiresAtIsCappedAtTwoHours(t *testing.T) {
	t.Parallel()
	e := setup(t)
	pre := e.precreate(t, "QR_1", 100, e.clock.Now().Add(5*time.Hour), "")
	if pre.Outcome != orderpay.OutcomeAccepted {
		t.Fatalf("precreate: %+v", pre)
	}
	if want := e.clock.Now().Add(2 * time.Hour); !pre.QRExpiresAt.Equal(want) {
		t.Fatalf("QRExpiresAt %v, want %v", pre.QRExpiresAt, want)
	}
}

func TestPrecreate_RepeatGivesSameCode_AlreadyPaidIsUnknown(t *testing.T) {
	t.Parallel()
	e := setup(t)
	deadline := e.clock.Now().Add(time.Hour)
	first := e.precreate(t, "REP_1", 500, deadline, "")
	again := e.precreate(t, "REP_1", 500, deadline, "")
	if first.Outcome != orderpay.OutcomeAccepted || again.QRCode != first.QRCode {
		t.Fatalf("repeat: %+v then %+v", first, again)
	}
	if other := e.precreate(t, "REP_1", 600, deadline, ""); other.Outcome != orderpay.OutcomeRejected {
		t.Fatalf("same number, other amount: %+v, want Rejected", other)
	}
	if _, err := e.sim.Pay(context.Background(), first.QRCode); err != nil {
		t.Fatal(err)
	}
	// ACQ.TRADE_HAS_SUCCESS: paid, so not a refusal; a query must decide.
	if paid := e.precreate(t, "REP_1", 500, deadline, ""); paid.Outcome != orderpay.OutcomeUnknown ||
		!strings.Contains(paid.Detail, "ACQ.TRADE_HAS_SUCCESS") {
		t.Fatalf("precreate of a paid trade: %+v, want Unknown", paid)
	}
}

func TestPrecreate_RefusedByTheChannelIsRejected(t *testing.T) {
	t.Parallel()
	e := setup(t)
	_, forger := simtest.Keys(t)
	forgerPEM, _ := sim.PrivateKeyPEM(forger)
	// Signed with a key the channel does not know: a signed, verified 40002 refusal.
	wrongKey := newChannel(t, e.keys, e.srv.URL+"/gateway.do", func(c *alipay.Config) {
		c.AppPrivateKeyPEM = forgerPEM
		c.Clock = e.clock
	})
	res := wrongKey.Precreate(context.Background(), orderpay.PrecreateRequest{
		OutTradeNo: "REJ_1", Amount: 100, Subject: "x", Deadline: e.clock.Now().Add(time.Hour),
	})
	if res.Outcome != orderpay.OutcomeRejected || !strings.Contains(res.Detail, "isv.invalid-signature") {
		t.Fatalf("got %+v, want Rejected isv.invalid-signature", res)
	}
	// A request that breaks the field rules is never sent.
	res = e.precreate(t, "REJ-2", 100, e.clock.Now().Add(time.Hour), "")
	if res.Outcome != orderpay.OutcomeRejected || res.Raw != "" {
		t.Fatalf("bad out_trade_no: %+v, want Rejected without a call", res)
	}
}

func TestQuery_NotScannedIsNotPaid_ScannedPastDeadlineIsClosed(t *testing.T) {
	t.Parallel()
	e := setup(t)
	pre := e.precreate(t, "CL_1", 300, e.clock.Now().Add(10*time.Minute), "")
	if q := e.ch.Query(context.Background(), "CL_1"); q.Outcome != orderpay.OutcomeNotPaid ||
		!strings.Contains(q.Detail, "ACQ.TRADE_NOT_EXIST") {
		t.Fatalf("not scanned: %+v, want NotPaid (ACQ.TRADE_NOT_EXIST)", q)
	}
	if _, err := e.sim.Scan(context.Background(), pre.QRCode); err != nil {
		t.Fatal(err)
	}
	if q := e.ch.Query(context.Background(), "CL_1"); q.Outcome != orderpay.OutcomeNotPaid || q.TradeNo == "" {
		t.Fatalf("scanned: %+v, want NotPaid with a trade_no", q)
	}
	e.clock.Advance(10 * time.Minute)
	if q := e.ch.Query(context.Background(), "CL_1"); q.Outcome != orderpay.OutcomeClosed {
		t.Fatalf("past the deadline: %+v, want Closed", q)
	}
}

// paidNotification runs a payment and returns the genuine notification body it produced.
func paidNotification(t *testing.T, e *env) string {
	t.Helper()
	m := newMerchant(t, e.ch)
	pre := e.precreate(t, "NT_1", 1234, e.clock.Now().Add(time.Hour), m.srv.URL)
	if _, err := e.sim.Pay(context.Background(), pre.QRCode); err != nil {
		t.Fatal(err)
	}
	body, _, err := m.first(t)
	if err != nil {
		t.Fatalf("genuine notification refused: %v", err)
	}
	return body
}

func TestVerifyNotification_ForgedOrForeignIsUnauthorized(t *testing.T) {
	t.Parallel()
	e := setup(t)
	_, forger := simtest.Keys(t)
	genuine := paidNotification(t, e)

	// edit changes the genuine form and, if signer is set, signs it again with that key.
	edit := func(change func(url.Values), signer *rsa.PrivateKey) string {
		v, err := url.ParseQuery(genuine)
		if err != nil {
			t.Fatal(err)
		}
		change(v)
		if signer != nil {
			sig, err := sim.SignAlipayParams(signer, v)
			if err != nil {
				t.Fatal(err)
			}
			v.Set("sign", sig)
		}
		return v.Encode()
	}
	cases := []struct {
		name string
		body string
		want string
	}{
		{"total_amount raised, signature kept", edit(func(v url.Values) { v.Set("total_amount", "9999.00") }, nil), orderpay.EUNAUTHORIZED},
		{"total_amount changed, re-signed by a forger", edit(func(v url.Values) { v.Set("total_amount", "0.01") }, forger), orderpay.EUNAUTHORIZED},
		{"signature removed", edit(func(v url.Values) { v.Del("sign") }, nil), orderpay.EUNAUTHORIZED},
		{"signature not base64", edit(func(v url.Values) { v.Set("sign", "%%%") }, nil), orderpay.EUNAUTHORIZED},
		{"other app_id, genuinely signed", edit(func(v url.Values) { v.Set("app_id", "2021000000000001") }, e.keys.AlipayPrivateKey), orderpay.EUNAUTHORIZED},
		{"other seller_id, genuinely signed", edit(func(v url.Values) { v.Set("seller_id", "2088000000000001") }, e.keys.AlipayPrivateKey), orderpay.EUNAUTHORIZED},
		{"unreadable amount, genuinely signed", edit(func(v url.Values) { v.Set("total_amount", "12.345") }, e.keys.AlipayPrivateKey), orderpay.EINVALID},
		{"not a form", "total_amount=%zz", orderpay.EINVALID},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, err := e.ch.VerifyNotification(context.Background(), http.Header{}, []byte(tc.body))
			if got := orderpay.ErrorCode(err); got != tc.want || n != nil {
				t.Fatalf("got %v %v, want %s", n, err, tc.want)
			}
		})
	}

	// The untouched original still verifies, and a genuine re-sign of it too: the checks
	// above fail for what was changed, not for being re-encoded.
	for _, body := range []string{genuine, edit(func(url.Values) {}, e.keys.AlipayPrivateKey)} {
		if n, err := e.ch.VerifyNotification(context.Background(), nil, []byte(body)); err != nil || n.Amount != 1234 {
			t.Fatalf("genuine notification: %+v %v", n, err)
		}
	}
}

func TestAck_IsExactlySuccess(t *testing.T) {
	t.Parallel()
	keys, _ := simtest.Keys(t)
	ch := newChannel(t, keys, "http://127.0.0.1:1/gateway.do")
	ack := ch.Ack()
	if ack.Status != 200 || !bytes.Equal(ack.Body, []byte("success")) || ch.Name() != "alipay" {
		t.Fatalf("ack %+v name %s", ack, ch.Name())
	}
}

// fakeGateway answers every gateway call with the inner object reply, signed with key
// (unsigned if key is nil), under the node the method calls for.
func fakeGateway(t *testing.T, key *rsa.PrivateKey, reply string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		node := strings.ReplaceAll(r.Form.Get("method"), ".", "_") + "_response"
		body := `{"` + node + `":` + reply
		if key != nil {
			sig, err := sim.SignSHA256RSA(key, []byte(reply))
			if err != nil {
				t.Error(err)
			}
			body += `,"sign":"` + sig + `"`
		}
		_, _ = io.WriteString(w, body+"}")
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestOutcomes_SignedGatewayCodes(t *testing.T) {
	t.Parallel()
	keys, _ := simtest.Keys(t)
	deadline := time.Now().Add(time.Hour)
	req := orderpay.PrecreateRequest{OutTradeNo: "OC_1", Amount: 100, Subject: "x", Deadline: deadline}

	precreates := []struct {
		reply string
		want  orderpay.Outcome
	}{
		{`{"code":"10000","msg":"Success","out_trade_no":"OC_1","qr_code":"https://qr.alipay.com/baxabc"}`, orderpay.OutcomeAccepted},
		{`{"code":"10000","msg":"Success","out_trade_no":"OC_1"}`, orderpay.OutcomeUnknown},
		{`{"code":"10000","msg":"Success","out_trade_no":"OTHER","qr_code":"https://qr.alipay.com/baxabc"}`, orderpay.OutcomeUnknown},
		{`{"code":"20000","msg":"Service Currently Unavailable","sub_code":"isp.unknow-error"}`, orderpay.OutcomeUnknown},
		{`{"code":"40004","msg":"Business Failed","sub_code":"ACQ.SYSTEM_ERROR"}`, orderpay.OutcomeUnknown},
		{`{"code":"40005","msg":"Call Limited","sub_code":"aop.ACQ.CALL_LIMITED"}`, orderpay.OutcomeUnknown},
		{`{"code":"40004","msg":"Business Failed","sub_code":"ACQ.TRADE_HAS_CLOSE"}`, orderpay.OutcomeRejected},
		{`{"code":"40001","msg":"Missing Required Arguments","sub_code":"isv.missing-signature"}`, orderpay.OutcomeRejected},
		{`{"code":"40003","msg":"Insufficient Conditions","sub_code":"isv.x"}`, orderpay.OutcomeRejected},
		{`{"code":"40006","msg":"Insufficient Permissions","sub_code":"isv.insufficient-isv-permissions"}`, orderpay.OutcomeRejected},
		{`{"code":"20001","msg":"Insufficient Token Permissions","sub_code":"aop.invalid-auth-token"}`, orderpay.OutcomeRejected},
	}
	for _, tc := range precreates {
		ch := newChannel(t, keys, fakeGateway(t, keys.AlipayPrivateKey, tc.reply).URL)
		if got := ch.Precreate(context.Background(), req); got.Outcome != tc.want {
			t.Errorf("precreate %s: %s (%s), want %s", tc.reply, got.Outcome, got.Detail, tc.want)
		}
	}

	queries := []struct {
		reply  string
		want   orderpay.Outcome
		amount int64
	}{
		{`{"code":"10000","msg":"Success","out_trade_no":"OC_1","trade_no":"1","trade_status":"TRADE_FINISHED","total_amount":"88.80","send_pay_date":"2025-03-14 10:00:00"}`, orderpay.OutcomePaid, 8880},
		{`{"code":"10000","msg":"Success","out_trade_no":"OC_1","trade_no":"1","trade_status":"TRADE_SUCCESS","total_amount":"1.234"}`, orderpay.OutcomeUnknown, 0},
		{`{"code":"10000","msg":"Success","out_trade_no":"OTHER","trade_no":"1","trade_status":"TRADE_SUCCESS","total_amount":"1.00"}`, orderpay.OutcomeUnknown, 0},
		{`{"code":"10000","msg":"Success","out_trade_no":"OC_1","trade_no":"1","trade_status":"TRADE_CLOSED","total_amount":"1.00","send_pay_date":"2025-03-14 10:00:00"}`, orderpay.OutcomePaid, 100}, // paid, then fully refunded
		{`{"code":"10000","msg":"Success","out_trade_no":"OC_1","trade_no":"1","trade_status":"TRADE_CLOSED","total_amount":"1.00"}`, orderpay.OutcomeClosed, 100},
		{`{"code":"10000","msg":"Success","out_trade_no":"OC_1","trade_no":"1","trade_status":"SOMETHING_NEW","total_amount":"1.00"}`, orderpay.OutcomeUnknown, 100},
		{`{"code":"40004","msg":"Business Failed","sub_code":"ACQ.TRADE_NOT_EXIST"}`, orderpay.OutcomeNotPaid, 0},
		{`{"code":"40004","msg":"Business Failed","sub_code":"ACQ.SYSTEM_ERROR"}`, orderpay.OutcomeUnknown, 0},
		{`{"code":"20000","msg":"Service Currently Unavailable","sub_code":"isp.unknow-error"}`, orderpay.OutcomeUnknown, 0},
		{`{"code":"40002","msg":"Invalid Arguments","sub_code":"isv.invalid-signature"}`, orderpay.OutcomeUnknown, 0},
	}
	for _, tc := range queries {
		ch := newChannel(t, keys, fakeGateway(t, keys.AlipayPrivateKey, tc.reply).URL)
		got := ch.Query(context.Background(), "OC_1")
		if got.Outcome != tc.want || got.Amount != tc.amount {
			t.Errorf("query %s: %s %d (%s), want %s %d", tc.reply, got.Outcome, got.Amount, got.Detail, tc.want, tc.amount)
		}
	}
}

// proxy forwards to the simulator and lets rewrite change the status and body it answers.
func proxy(t *testing.T, e *env, rewrite func(status int, body []byte) (int, []byte)) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/gateway.do" {
			t.Errorf("proxy called at %s", r.URL.Path)
		}
		rec := httptest.NewRecorder()
		e.sim.Handler().ServeHTTP(rec, r)
		status, body := rewrite(rec.Code, rec.Body.Bytes())
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// gw is the gateway address of a proxy.
func gw(srv *httptest.Server) string { return srv.URL + "/gateway.do" }

var signField = regexp.MustCompile(`,"sign":"[^"]*"`)

func TestOutcomes_GatewayFaultsAreUnknown(t *testing.T) {
	t.Parallel()
	e := setup(t)
	_, forger := simtest.Keys(t)
	// A paid trade: every fault below hides a true "paid" (or a valid QR code), and none
	// of them may be read as an answer.
	paidPre := e.precreate(t, "F_PAID", 700, e.clock.Now().Add(time.Hour), "")
	if _, err := e.sim.Pay(context.Background(), paidPre.QRCode); err != nil {
		t.Fatal(err)
	}

	stopHanging := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read the body first: only then does the server notice the client leaving.
		_, _ = io.Copy(io.Discard, r.Body)
		select { // never answers while the client waits
		case <-r.Context().Done():
		case <-stopHanging:
		}
	}))
	t.Cleanup(hang.Close)
	t.Cleanup(func() { close(stopHanging) })
	refused := httptest.NewServer(http.NotFoundHandler())
	refused.Close()

	faults := []struct {
		name    string
		gateway string
	}{
		{"500 with a valid signed body", gw(proxy(t, e, func(_ int, b []byte) (int, []byte) { return 500, b }))},
		{"502 HTML", gw(proxy(t, e, func(int, []byte) (int, []byte) { return 502, []byte("<html>Bad Gateway</html>") }))},
		{"200 not JSON", gw(proxy(t, e, func(int, []byte) (int, []byte) { return 200, []byte("<html>maintenance</html>") }))},
		{"unsigned body", gw(proxy(t, e, func(s int, b []byte) (int, []byte) { return s, signField.ReplaceAll(b, nil) }))},
		{"signed by a forger", gw(proxy(t, e, func(s int, b []byte) (int, []byte) {
			var top map[string]json.RawMessage
			_ = json.Unmarshal(b, &top)
			for name, raw := range top {
				if name != "sign" {
					sig, _ := sim.SignSHA256RSA(forger, raw)
					return s, []byte(`{"` + name + `":` + string(raw) + `,"sign":"` + sig + `"}`)
				}
			}
			return s, b
		}))},
		{"hangs past the timeout", hang.URL},
		{"connection refused", refused.URL},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			ch := newChannel(t, e.keys, f.gateway, func(c *alipay.Config) {
				c.Timeout = 300 * time.Millisecond
				c.Clock = e.clock
			})
			start := time.Now()
			q := ch.Query(context.Background(), "F_PAID")
			if q.Outcome != orderpay.OutcomeUnknown {
				t.Errorf("query: %+v, want Unknown", q)
			}
			pre := ch.Precreate(context.Background(), orderpay.PrecreateRequest{
				OutTradeNo: "F_NEW", Amount: 100, Subject: "x", Deadline: e.clock.Now().Add(time.Hour),
			})
			if pre.Outcome != orderpay.OutcomeUnknown || pre.QRCode != "" {
				t.Errorf("precreate: %+v, want Unknown", pre)
			}
			if elapsed := time.Since(start); elapsed > 3*time.Second {
				t.Errorf("took %v: the timeout did not bound the calls", elapsed)
			}
		})
	}
	// The simulator itself, unwrapped, gives the real answer.
	if q := e.ch.Query(context.Background(), "F_PAID"); q.Outcome != orderpay.OutcomePaid || q.Amount != 700 {
		t.Fatalf("direct query: %+v", q)
	}
}

func TestNew_RefusesIncompleteOrBadConfig(t *testing.T) {
	t.Parallel()
	keys, _ := simtest.Keys(t)
	good := alipay.Config{
		AppID:              keys.AppID,
		SellerID:           keys.SellerID,
		AppPrivateKeyPEM:   simtest.PEM(t, keys.AppPrivateKeyPEM),
		AlipayPublicKeyPEM: simtest.PEM(t, keys.AlipayPublicKeyPEM),
	}
	if _, err := alipay.New(good); err != nil {
		t.Fatalf("good config: %v", err)
	}
	for name, mod := range map[string]func(*alipay.Config){
		"no app id":          func(c *alipay.Config) { c.AppID = "" },
		"no seller id":       func(c *alipay.Config) { c.SellerID = "" },
		"garbage app key":    func(c *alipay.Config) { c.AppPrivateKeyPEM = "not a key" },
		"garbage alipay key": func(c *alipay.Config) { c.AlipayPublicKeyPEM = "not a key" },
		"negative timeout":   func(c *alipay.Config) { c.Timeout = -time.Second },
	} {
		cfg := good
		mod(&cfg)
		if _, err := alipay.New(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
