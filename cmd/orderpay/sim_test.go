package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	alipaysdk "github.com/smartwalle/alipay/v3"
	"github.com/wechatpay-apiv3/wechatpay-go/core"
	"github.com/wechatpay-apiv3/wechatpay-go/core/option"
	"github.com/wechatpay-apiv3/wechatpay-go/services/payments/jsapi"
	"github.com/wechatpay-apiv3/wechatpay-go/services/payments/native"
	"github.com/wechatpay-apiv3/wechatpay-go/utils"
)

// startSim runs `orderpay sim` as another project would, and returns its URL once it
// listens. The command stops when the test ends.
func startSim(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"sim", "--addr", "127.0.0.1:0", "--log-level", "warn"}, args...), pw, io.Discard)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("orderpay sim ended with %v", err)
		}
		pw.Close()
	})
	lines := bufio.NewScanner(pr)
	if !lines.Scan() {
		t.Fatal("orderpay sim printed nothing")
	}
	url, ok := strings.CutPrefix(lines.Text(), "channel simulator running at ")
	if !ok {
		t.Fatalf("first line %q", lines.Text())
	}
	go io.Copy(io.Discard, pr)
	return url
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// manifest reads a keys manifest's string values; manifestList reads one of its lists.
func manifest(t *testing.T, path string) map[string]string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(readFile(t, path)), &m); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

func manifestList(t *testing.T, path, key string) []string {
	t.Helper()
	var m map[string]json.RawMessage
	var list []string
	if err := json.Unmarshal([]byte(readFile(t, path)), &m); err != nil || json.Unmarshal(m[key], &list) != nil {
		t.Fatalf("%s has no list %s: %v", path, key, err)
	}
	return list
}

// rewriteHost sends the WeChat Pay SDK's requests to the simulator: the SDK has no base-URL
// option, and its signatures cover only the path and query.
type rewriteHost struct{ base string }

func (r rewriteHost) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.URL.Scheme, req.URL.Host = "http", strings.TrimPrefix(r.base, "http://")
	return http.DefaultTransport.RoundTrip(req)
}

// `orderpay sim` alone is a sandbox for any project: the official SDKs, configured only
// from the files in --keys, take a payment through it, and a --faults plan makes the
// channel misbehave on request.
func TestSimCommandIsASandboxForTheOfficialSDKs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	url := startSim(t, "--keys", dir, "--faults", `{"seed":1,"rules":[{"channel":"alipay","method":"query","kind":"system_error","limit":1}]}`)
	ctx := context.Background()
	pay := func(qr string) {
		t.Helper()
		resp, err := http.Post(url+"/sim/pay", "application/json", strings.NewReader(`{"qr_code":"`+qr+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("wallet pay: %d", resp.StatusCode)
		}
	}

	// Alipay through smartwalle/alipay, from alipay/manifest.json and its PEM files.
	am := manifest(t, filepath.Join(dir, "alipay", "manifest.json"))
	ali, err := alipaysdk.New(am["app_id"], readFile(t, filepath.Join(dir, "alipay", am["app_private_key_file"])), false,
		alipaysdk.WithSandboxGateway(url+"/gateway.do"))
	if err != nil {
		t.Fatal(err)
	}
	if err := ali.LoadAliPayPublicKey(readFile(t, filepath.Join(dir, "alipay", am["alipay_public_key_file"]))); err != nil {
		t.Fatal(err)
	}
	pre, err := ali.TradePreCreate(ctx, alipaysdk.TradePreCreate{Trade: alipaysdk.Trade{OutTradeNo: "SANDBOX_A1", TotalAmount: "9.90",
		Subject: "sandbox", ProductCode: "FACE_TO_FACE_PAYMENT"}})
	if err != nil || pre.Code != alipaysdk.CodeSuccess {
		t.Fatalf("alipay precreate: %+v, %v", pre, err)
	}
	pay(pre.QRCode)
	q, err := ali.TradeQuery(ctx, alipaysdk.TradeQuery{OutTradeNo: "SANDBOX_A1"})
	if err != nil || q.SubCode != "ACQ.SYSTEM_ERROR" {
		t.Fatalf("first query, under the injected fault: %+v, %v", q, err)
	}
	q, err = ali.TradeQuery(ctx, alipaysdk.TradeQuery{OutTradeNo: "SANDBOX_A1"})
	if err != nil || q.TradeStatus != alipaysdk.TradeStatusSuccess || q.TotalAmount != "9.90" {
		t.Fatalf("second query: %+v, %v", q, err)
	}

	// WeChat Pay through wechatpay-go, from wechat/manifest.json and its files.
	wm := manifest(t, filepath.Join(dir, "wechat", "manifest.json"))
	merchantKey, err := utils.LoadPrivateKey(readFile(t, filepath.Join(dir, "wechat", wm["merchant_private_key_file"])))
	if err != nil {
		t.Fatal(err)
	}
	platformKey, err := utils.LoadPublicKey(readFile(t, filepath.Join(dir, "wechat", wm["platform_public_key_file"])))
	if err != nil {
		t.Fatal(err)
	}
	client, err := core.NewClient(ctx,
		option.WithWechatPayPublicKeyAuthCipher(wm["mchid"], wm["merchant_serial"], merchantKey, wm["public_key_id"], platformKey),
		option.WithHTTPClient(&http.Client{Transport: rewriteHost{url}, Timeout: 10 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	svc := native.NativeApiService{Client: client}
	str := core.String
	prepay, _, err := svc.Prepay(ctx, native.PrepayRequest{Appid: str(wm["appid"]), Mchid: str(wm["mchid"]), Description: str("sandbox"),
		OutTradeNo: str("SANDBOX_W1"), NotifyUrl: str("https://merchant.example/notify"), Amount: &native.Amount{Total: core.Int64(990)}})
	if err != nil {
		t.Fatalf("wechat prepay: %v", err)
	}
	pay(*prepay.CodeUrl)
	tx, _, err := svc.QueryOrderByOutTradeNo(ctx, native.QueryOrderByOutTradeNoRequest{OutTradeNo: str("SANDBOX_W1"), Mchid: str(wm["mchid"])})
	if err != nil || *tx.TradeState != "SUCCESS" || *tx.Amount.Total != 990 {
		t.Fatalf("wechat query: %+v, %v", tx, err)
	}

	// A JSAPI payment from the same files: the official account's web OAuth tells the buyer's
	// openid (with the AppSecret of oauth_secret_file), the SDK places the order and signs
	// what the page hands WeChat's client, and the client pays it from a page under a
	// registered pay directory.
	for _, k := range []string{"jsapi_appid", "mini_appid", "app_appid", "oauth_secret_file"} {
		if wm[k] == "" {
			t.Fatalf("wechat/manifest.json names no %s: %v", k, wm)
		}
	}
	paths := manifestList(t, filepath.Join(dir, "wechat", "manifest.json"), "jsapi_paths")
	if len(paths) == 0 || len(manifestList(t, filepath.Join(dir, "wechat", "manifest.json"), "h5_domains")) == 0 {
		t.Fatal("wechat/manifest.json registers no JSAPI path or H5 domain")
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	authorize, err := noRedirect.Get(url + "/connect/oauth2/authorize?appid=" + wm["jsapi_appid"] +
		"&redirect_uri=" + neturl.QueryEscape(paths[0]+"back") + "&response_type=code&scope=snsapi_base&state=s1&buyer=alice")
	if err != nil {
		t.Fatal(err)
	}
	authorize.Body.Close()
	back, err := neturl.Parse(authorize.Header.Get("Location"))
	if err != nil || authorize.StatusCode != http.StatusFound || back.Query().Get("code") == "" || back.Query().Get("state") != "s1" {
		t.Fatalf("authorize: %d %q", authorize.StatusCode, authorize.Header.Get("Location"))
	}
	var token struct {
		OpenID string `json:"openid"`
	}
	tokenResp, err := http.Get(url + "/sns/oauth2/access_token?appid=" + wm["jsapi_appid"] + "&secret=" +
		readFile(t, filepath.Join(dir, "wechat", wm["oauth_secret_file"])) + "&code=" + back.Query().Get("code") + "&grant_type=authorization_code")
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(tokenResp.Body).Decode(&token)
	tokenResp.Body.Close()
	if token.OpenID == "" {
		t.Fatal("the OAuth code exchange gave no openid")
	}
	js := jsapi.JsapiApiService{Client: client}
	req, _, err := js.PrepayWithRequestPayment(ctx, jsapi.PrepayRequest{Appid: str(wm["jsapi_appid"]), Mchid: str(wm["mchid"]),
		Description: str("sandbox"), OutTradeNo: str("SANDBOX_J1"), NotifyUrl: str("https://merchant.example/notify"),
		Amount: &jsapi.Amount{Total: core.Int64(990)}, Payer: &jsapi.Payer{Openid: str(token.OpenID)}})
	if err != nil {
		t.Fatalf("wechat jsapi prepay: %v", err)
	}
	instruction, _ := json.Marshal(map[string]any{
		"pay": map[string]string{"kind": "jsapi", "channel": "wechat", "method": "jsapi", "appId": *req.Appid, "timeStamp": *req.TimeStamp,
			"nonceStr": *req.NonceStr, "package": *req.Package, "signType": *req.SignType, "paySign": *req.PaySign},
		"buyer": "alice", "referer": paths[0] + "SANDBOX_J1", "user_agent": "Mozilla/5.0 MicroMessenger/8.0"})
	paid, err := http.Post(url+"/sim/pay", "application/json", strings.NewReader(string(instruction)))
	if err != nil {
		t.Fatal(err)
	}
	paid.Body.Close()
	if paid.StatusCode != http.StatusOK {
		t.Fatalf("the WeChat client paying the JSAPI instruction: %d", paid.StatusCode)
	}
	tx, _, err = svc.QueryOrderByOutTradeNo(ctx, native.QueryOrderByOutTradeNoRequest{OutTradeNo: str("SANDBOX_J1"), Mchid: str(wm["mchid"])})
	if err != nil || *tx.TradeState != "SUCCESS" || *tx.TradeType != "JSAPI" || *tx.Payer.Openid != token.OpenID {
		t.Fatalf("wechat query of the JSAPI order: %+v, %v", tx, err)
	}

	// The channels file written beside the keys names every method's settings.
	channels := readFile(t, filepath.Join(dir, "channels.toml"))
	for _, k := range []string{"jsapi_appid = \"" + wm["jsapi_appid"], "mini_appid = \"" + wm["mini_appid"], "app_appid = \"" + wm["app_appid"],
		"h5_domains = [", "jsapi_paths = [", "oauth_secret_file = "} {
		if !strings.Contains(channels, k) {
			t.Fatalf("channels.toml has no %q:\n%s", k, channels)
		}
	}

	// The ledger has the three payments, in fen.
	resp, err := http.Get(url + "/sim/ledger")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ledger []struct {
		Channel string `json:"channel"`
		Amount  int64  `json:"amount"`
	}
	json.NewDecoder(resp.Body).Decode(&ledger)
	if len(ledger) != 3 || ledger[0].Amount != 990 || ledger[1].Amount != 990 || ledger[2].Amount != 990 || ledger[0].Channel != "alipay" ||
		ledger[1].Channel != "wechat" || ledger[2].Channel != "wechat" {
		t.Fatalf("ledger %+v", ledger)
	}
}
