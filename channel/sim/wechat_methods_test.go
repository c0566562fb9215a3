package sim_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/wechatpay-apiv3/wechatpay-go/core"
	"github.com/wechatpay-apiv3/wechatpay-go/services/payments/app"
	"github.com/wechatpay-apiv3/wechatpay-go/services/payments/h5"
	"github.com/wechatpay-apiv3/wechatpay-go/services/payments/jsapi"

	"orderpay"
	"orderpay/channel/sim"
)

// The official SDK's own calls, used the way a merchant uses them, against the simulator
// with answer verification on: jsapi.PrepayWithRequestPayment for an official account's page
// and for a mini program, h5.Prepay with the link opened in a phone's browser, and
// app.PrepayWithRequestPayment for the app. What each hands the device is accepted by the
// simulated WeChat client, pays the order, and a verified notification says so.
func TestOfficialSDKMethodsArePaidByTheSimulatedClient(t *testing.T) {
	t.Parallel()
	b := wxSDKSetup(t, sim.Config{TimeScale: fastTime})
	ctx := context.Background()
	client := wxSDKClient(t, b, nil)
	recv := newWxReceiver(t, reply{http.StatusNoContent, ""})
	str := core.String
	expire := core.Time(b.clock.Now().Add(time.Hour))
	pay := func(no string, a sim.PayAs) {
		t.Helper()
		a.Buyer = "alice"
		if err := a.Pay.Check(); err != nil {
			t.Fatalf("%s: %v", no, err)
		}
		res, err := b.sim.PayInstruction(ctx, a)
		if err != nil || res.Status != sim.WechatSuccess || res.OutTradeNo != no {
			t.Fatalf("the client paying %s: %+v, %v", no, res, err)
		}
		waitNotify(t, b.sim, no)
	}

	for i, mini := range []bool{false, true} {
		appid, method := b.wk.JSAPIAppID, orderpay.MethodJSAPI
		if mini {
			appid, method = b.wk.MiniAppID, orderpay.MethodMini
		}
		no := []string{"SDK_JSAPI", "SDK_MINI"}[i]
		svc := jsapi.JsapiApiService{Client: client}
		resp, _, err := svc.PrepayWithRequestPayment(ctx, jsapi.PrepayRequest{Appid: str(appid), Mchid: str(b.wk.MchID),
			Description: str("奶茶"), OutTradeNo: str(no), TimeExpire: expire, NotifyUrl: str(recv.url),
			Amount: &jsapi.Amount{Total: core.Int64(1200)}, Payer: &jsapi.Payer{Openid: str(b.sim.IdentityOf("alice", appid).OpenID)}})
		if err != nil {
			t.Fatalf("%s prepay: %v", method, err)
		}
		p := orderpay.NewInstruction(orderpay.ChannelWechat, method, "appId", *resp.Appid, "timeStamp", *resp.TimeStamp,
			"nonceStr", *resp.NonceStr, "package", *resp.Package, "signType", *resp.SignType, "paySign", *resp.PaySign)
		pay(no, sim.PayAs{Pay: p, Referer: "http://127.0.0.1:8080/pay/" + no, UserAgent: "MicroMessenger"})
	}

	h := h5.H5ApiService{Client: client}
	h5resp, _, err := h.Prepay(ctx, h5.PrepayRequest{Appid: str(b.wk.AppID), Mchid: str(b.wk.MchID), Description: str("奶茶"),
		OutTradeNo: str("SDK_H5"), TimeExpire: expire, NotifyUrl: str(recv.url), Amount: &h5.Amount{Total: core.Int64(1200)},
		SceneInfo: &h5.SceneInfo{PayerClientIp: str("203.0.113.7"), H5Info: &h5.H5Info{Type: str("Wap")}}})
	if err != nil {
		t.Fatalf("h5 prepay: %v", err)
	}
	link := *h5resp.H5Url + "&redirect_url=" + url.QueryEscape("https://shop.example/pay/SDK_H5")
	pay("SDK_H5", sim.PayAs{Pay: orderpay.NewInstruction(orderpay.ChannelWechat, orderpay.MethodH5, "url", link),
		Referer: "http://localhost:8080/pay/SDK_H5", ClientIP: "203.0.113.7", UserAgent: "Mozilla/5.0 Safari"})

	a := app.AppApiService{Client: client}
	appResp, _, err := a.PrepayWithRequestPayment(ctx, app.PrepayRequest{Appid: str(b.wk.AppAppID), Mchid: str(b.wk.MchID),
		Description: str("奶茶"), OutTradeNo: str("SDK_APP"), TimeExpire: expire, NotifyUrl: str(recv.url), Amount: &app.Amount{Total: core.Int64(1200)}})
	if err != nil {
		t.Fatalf("app prepay: %v", err)
	}
	pay("SDK_APP", sim.PayAs{Pay: orderpay.NewInstruction(orderpay.ChannelWechat, orderpay.MethodApp, "appid", b.wk.AppAppID,
		"partnerid", *appResp.PartnerId, "prepayid", *appResp.PrepayId, "package", *appResp.Package, "noncestr", *appResp.NonceStr,
		"timestamp", *appResp.TimeStamp, "sign", *appResp.Sign)})

	// Every notification verifies, and names the trade type and the app it was made for.
	want := map[string][2]string{"SDK_JSAPI": {"JSAPI", b.wk.JSAPIAppID}, "SDK_MINI": {"JSAPI", b.wk.MiniAppID},
		"SDK_H5": {"MWEB", b.wk.AppID}, "SDK_APP": {"APP", b.wk.AppAppID}}
	for _, n := range recv.received() {
		if err := verifyWechatSignature(b.wk, n.header, n.body, time.Now()); err != nil {
			t.Fatal(err)
		}
		txn := decryptNotification(t, b.wk, n.body)
		w := want[txn["out_trade_no"].(string)]
		if txn["trade_state"] != "SUCCESS" || txn["trade_type"] != w[0] || txn["appid"] != w[1] {
			t.Fatalf("notification %v, want trade_type %s for %s", txn, w[0], w[1])
		}
		delete(want, txn["out_trade_no"].(string))
	}
	if len(want) != 0 {
		t.Fatalf("no notification for %v", want)
	}
}

// decryptNotification opens a notification's resource with the APIv3 key.
func decryptNotification(t *testing.T, wk *sim.WechatKeys, body []byte) map[string]any {
	t.Helper()
	var env struct {
		Resource struct {
			Ciphertext     string `json:"ciphertext"`
			AssociatedData string `json:"associated_data"`
			Nonce          string `json:"nonce"`
		} `json:"resource"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatal(err)
	}
	plain, err := sim.DecryptWechatResource(wk.APIv3Key, env.Resource.Ciphertext, env.Resource.AssociatedData, env.Resource.Nonce)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(plain, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// methodBody is a JSAPI, H5 or App prepay body for this merchant.
func (b *wxBundle) methodBody(no, appid string, extra map[string]any) string {
	m := map[string]any{"appid": appid, "mchid": b.wk.MchID, "description": "订单 " + no, "out_trade_no": no, "notify_url": "",
		"amount": map[string]any{"total": 300, "currency": "CNY"}}
	for k, v := range extra {
		m[k] = v
	}
	out, _ := json.Marshal(m)
	return string(out)
}

// The prepays check what WeChat checks: each trade type only for the merchant's app of that
// type, JSAPI with an openid, H5 with the buyer's address and the page type. The same number
// with the same parameters gets a fresh prepay_id, with others INVALID_REQUEST; a known
// openid of another appid is refused.
func TestWechatMethodPrepays_CheckTheirAppsAndParameters(t *testing.T) {
	t.Parallel()
	b := wxSetup(t, sim.Config{})
	wk := b.wk
	openid := b.sim.IdentityOf("alice", wk.JSAPIAppID).OpenID
	payer := map[string]any{"payer": map[string]any{"openid": openid}}
	scene := map[string]any{"scene_info": map[string]any{"payer_client_ip": "203.0.113.7", "h5_info": map[string]any{"type": "Wap"}}}
	for _, tc := range []struct {
		name, uri, body string
		status          int
		code, words     string
	}{
		{"JSAPI for the main app", "jsapi", b.methodBody("MTH_001", wk.AppID, payer), 400, "APPID_MCHID_NOT_MATCH", ""},
		{"JSAPI for the mobile app", "jsapi", b.methodBody("MTH_002", wk.AppAppID, payer), 400, "APPID_MCHID_NOT_MATCH", ""},
		{"App for the official account", "app", b.methodBody("MTH_003", wk.JSAPIAppID, nil), 400, "APPID_MCHID_NOT_MATCH", ""},
		{"H5 for the mini program", "h5", b.methodBody("MTH_004", wk.MiniAppID, scene), 400, "APPID_MCHID_NOT_MATCH", ""},
		{"Native for the official account", "native", b.methodBody("MTH_005", wk.JSAPIAppID, nil), 400, "APPID_MCHID_NOT_MATCH", ""},
		{"JSAPI without a payer", "jsapi", b.methodBody("MTH_006", wk.JSAPIAppID, nil), 400, "PARAM_ERROR", "payer/openid"},
		{"JSAPI with a malformed openid", "jsapi", b.methodBody("MTH_007", wk.JSAPIAppID, map[string]any{"payer": map[string]any{"openid": "o123"}}), 400, "PARAM_ERROR", "openid"},
		{"H5 without the buyer's address", "h5", b.methodBody("MTH_008", wk.AppID, nil), 400, "PARAM_ERROR", "payer_client_ip"},
		{"H5 without a page type", "h5", b.methodBody("MTH_009", wk.AppID, map[string]any{"scene_info": map[string]any{"payer_client_ip": "203.0.113.7"}}), 400, "PARAM_ERROR", "h5_info"},
	} {
		a := b.call(t, http.MethodPost, "/v3/pay/transactions/"+tc.uri, tc.body)
		if a.status != tc.status || a.code() != tc.code || !strings.Contains(string(a.body), tc.words) {
			t.Errorf("%s: %s, want %d %s", tc.name, a, tc.status, tc.code)
		}
	}

	body := b.methodBody("MTH_100", wk.JSAPIAppID, payer)
	first := b.call(t, http.MethodPost, "/v3/pay/transactions/jsapi", body)
	second := b.call(t, http.MethodPost, "/v3/pay/transactions/jsapi", body)
	id1, id2 := first.json(t)["prepay_id"], second.json(t)["prepay_id"]
	if first.status != 200 || second.status != 200 || id1 == id2 || !strings.HasPrefix(id1.(string), "wx") {
		t.Fatalf("the same prepay twice: %s then %s, want two prepay_ids", first, second)
	}
	other := b.methodBody("MTH_100", wk.JSAPIAppID, map[string]any{"payer": map[string]any{"openid": b.sim.IdentityOf("bob", wk.JSAPIAppID).OpenID}})
	if a := b.call(t, http.MethodPost, "/v3/pay/transactions/jsapi", other); a.status != 400 || a.code() != "INVALID_REQUEST" ||
		!strings.Contains(string(a.body), "商户订单号重复") {
		t.Fatalf("the same number for another payer: %s, want INVALID_REQUEST 商户订单号重复", a)
	}
	if a := b.call(t, http.MethodPost, "/v3/pay/transactions/h5", b.methodBody("MTH_100", wk.AppID, scene)); a.status != 400 || a.code() != "INVALID_REQUEST" {
		t.Fatalf("the same number for another trade type: %s, want INVALID_REQUEST", a)
	}
	if q := b.query(t, "MTH_100").json(t); q["trade_state"] != "NOTPAY" || q["appid"] != wk.JSAPIAppID {
		t.Fatalf("the JSAPI order: %v", q)
	}

	// Once the simulator has met bob, his official-account openid is known as such.
	if _, err := b.sim.PayInstruction(context.Background(), sim.PayAs{Pay: orderpay.NewInstruction(orderpay.ChannelWechat, orderpay.MethodH5,
		"url", "https://wx.tenpay.com/cgi-bin/mmpayweb-bin/checkmweb?prepay_id=none"), Buyer: "bob", Referer: "http://127.0.0.1/"}); err == nil {
		t.Fatal("an unknown H5 link was paid")
	}
	bobs := b.sim.IdentityOf("bob", wk.JSAPIAppID).OpenID
	asMini := b.methodBody("MTH_101", wk.MiniAppID, map[string]any{"payer": map[string]any{"openid": bobs}})
	if a := b.call(t, http.MethodPost, "/v3/pay/transactions/jsapi", asMini); a.status != 400 || a.code() != "PARAM_ERROR" ||
		!strings.Contains(string(a.body), "appid和openid不匹配") {
		t.Fatalf("bob's official-account openid for the mini program: %s, want PARAM_ERROR appid和openid不匹配", a)
	}
}

// Call faults hit the new prepays as they hit Native's (sim.MethodPrecreate), and
// notification faults their notifications.
func TestWechatMethodPrepays_TakeTheFaults(t *testing.T) {
	t.Parallel()
	b := wxSetup(t, sim.Config{TimeScale: fastTime})
	wk := b.wk
	if err := b.sim.SetFaults(sim.FaultPlan{Rules: []sim.FaultRule{
		{Channel: "wechat", Method: sim.MethodPrecreate, Kind: sim.FaultSystemError, Limit: 1},
		{Channel: "wechat", Method: sim.MethodNotify, Kind: sim.FaultDrop, Limit: 1},
	}}); err != nil {
		t.Fatal(err)
	}
	body := b.methodBody("FLT_001", wk.AppAppID, nil)
	if a := b.do(t, wxRequest{method: http.MethodPost, uri: "/v3/pay/transactions/app", body: body}); a.status != 500 || a.code() != "SYSTEM_ERROR" {
		t.Fatalf("an App prepay under system_error: %s", a)
	}
	if a := b.query(t, "FLT_001"); a.status != 404 {
		t.Fatalf("the faulted prepay created an order: %s", a)
	}
	recv := newWxReceiver(t, reply{http.StatusNoContent, ""})
	var m map[string]any
	_ = json.Unmarshal([]byte(body), &m)
	m["notify_url"] = recv.url
	withURL, _ := json.Marshal(m)
	a := b.call(t, http.MethodPost, "/v3/pay/transactions/app", string(withURL))
	if a.status != 200 {
		t.Fatalf("the App prepay after the fault: %s", a)
	}
	id := a.json(t)["prepay_id"].(string)
	ts, nonce := "1700000000", "n0nce"
	sig, err := sim.SignSHA256RSA(wk.MerchantPrivateKey, []byte(wk.AppAppID+"\n"+ts+"\n"+nonce+"\n"+id+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.sim.PayInstruction(context.Background(), sim.PayAs{Pay: orderpay.NewInstruction(orderpay.ChannelWechat, orderpay.MethodApp,
		"appid", wk.AppAppID, "partnerid", wk.MchID, "prepayid", id, "package", "Sign=WXPay", "noncestr", nonce, "timestamp", ts, "sign", sig)}); err != nil {
		t.Fatal(err)
	}
	waitNotify(t, b.sim, "FLT_001")
	st := b.sim.NotifyStats()
	if len(st) != 1 || len(st[0].Attempts) < 2 || st[0].Attempts[0].Dropped != true {
		t.Fatalf("the App payment's notification: %+v, want its first attempt dropped", st)
	}
}

// The official account's web OAuth: the authorize page sends the browser back with a code
// for the signed-in buyer; the code gives that buyer's openid for the official account,
// once, within 5 minutes, and only with the right AppSecret; the redirect must be on the
// official account's domain.
func TestWechatOAuth_SnsapiBase(t *testing.T) {
	t.Parallel()
	b := wxSetup(t, sim.Config{})
	wk := b.wk
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	authorize := func(path, appid, redirect, buyer string) *http.Response {
		t.Helper()
		v := url.Values{"appid": {appid}, "redirect_uri": {redirect}, "response_type": {"code"}, "scope": {"snsapi_base"}, "state": {"xyz"}, "buyer": {buyer}}
		resp, err := noFollow.Get(b.srv.URL + path + "?" + v.Encode())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	token := func(appid, secret, code string) map[string]any {
		t.Helper()
		v := url.Values{"appid": {appid}, "secret": {secret}, "code": {code}, "grant_type": {"authorization_code"}}
		resp, err := http.Get(b.srv.URL + "/sns/oauth2/access_token?" + v.Encode())
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&m) != nil {
			t.Fatalf("access_token: %d", resp.StatusCode)
		}
		return m
	}
	code := func(resp *http.Response) string {
		t.Helper()
		u, err := url.Parse(resp.Header.Get("Location"))
		if err != nil || resp.StatusCode != http.StatusFound || u.Query().Get("state") != "xyz" || u.Query().Get("code") == "" {
			t.Fatalf("authorize: %d %q", resp.StatusCode, resp.Header.Get("Location"))
		}
		return u.Query().Get("code")
	}

	c := code(authorize("/connect/oauth2/authorize", wk.JSAPIAppID, "http://127.0.0.1:8080/pay/1", "carol"))
	if m := token(wk.JSAPIAppID, strings.Repeat("a", 32), c); m["errcode"] != float64(40125) || m["openid"] != nil {
		t.Fatalf("a wrong AppSecret: %v", m)
	}
	if m := token(wk.JSAPIAppID, wk.OAuthSecret, c); m["openid"] != b.sim.IdentityOf("carol", wk.JSAPIAppID).OpenID || m["scope"] != "snsapi_base" {
		t.Fatalf("the exchange: %v, want carol's openid for the official account", m)
	}
	if m := token(wk.JSAPIAppID, wk.OAuthSecret, c); m["errcode"] != float64(40163) {
		t.Fatalf("a code used twice: %v, want 40163", m)
	}
	c = code(authorize("/sim/wechat/oauth2/authorize", wk.JSAPIAppID, "http://localhost/pay/2", "carol"))
	b.clock.Advance(5 * time.Minute)
	if m := token(wk.JSAPIAppID, wk.OAuthSecret, c); m["errcode"] != float64(40029) {
		t.Fatalf("a code 5 minutes old: %v, want 40029", m)
	}
	if m := token(wk.MiniAppID, wk.OAuthSecret, "x"); m["errcode"] != float64(40013) {
		t.Fatalf("another appid: %v, want 40013", m)
	}
	for name, resp := range map[string]*http.Response{
		"a redirect on another domain": authorize("/connect/oauth2/authorize", wk.JSAPIAppID, "https://evil.example/cb", "carol"),
		"the mini program's appid":     authorize("/connect/oauth2/authorize", wk.MiniAppID, "http://127.0.0.1/pay/1", "carol"),
		"no signed-in buyer":           authorize("/connect/oauth2/authorize", wk.JSAPIAppID, "http://127.0.0.1/pay/1", ""),
	} {
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", name, resp.StatusCode)
		}
	}
}
