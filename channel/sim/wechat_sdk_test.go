package sim_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/wechatpay-apiv3/wechatpay-go/core"
	"github.com/wechatpay-apiv3/wechatpay-go/core/auth/verifiers"
	"github.com/wechatpay-apiv3/wechatpay-go/core/notify"
	"github.com/wechatpay-apiv3/wechatpay-go/core/option"
	"github.com/wechatpay-apiv3/wechatpay-go/services/payments"
	"github.com/wechatpay-apiv3/wechatpay-go/services/payments/native"
	"github.com/wechatpay-apiv3/wechatpay-go/services/refunddomestic"

	"orderpay"
	"orderpay/channel/sim"
)

// wxToSimulator sends the SDK's requests for https://api.mch.weixin.qq.com to the simulator
// and lets tamper change each answer's body. next sends them; nil is http.DefaultTransport.
type wxToSimulator struct {
	base   *url.URL
	tamper func([]byte) []byte
	next   http.RoundTripper
}

func (t wxToSimulator) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host == "api.mch.weixin.qq.com" {
		req = req.Clone(req.Context())
		req.URL.Scheme, req.URL.Host, req.Host = t.base.Scheme, t.base.Host, t.base.Host
	}
	next := t.next
	if next == nil {
		next = http.DefaultTransport
	}
	resp, err := next.RoundTrip(req)
	if err != nil || t.tamper == nil {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	body = t.tamper(body)
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	return resp, nil
}

// wxSDKSetup starts a simulator that signs with the wall clock, as WeChat does and as the SDK
// requires.
func wxSDKSetup(t *testing.T, cfg sim.Config) *wxBundle {
	t.Helper()
	cfg.WechatWallClock = orderpay.SystemClock{}
	return wxSetup(t, cfg)
}

// sdkClient is the official SDK in public key mode, pointed at the simulator.
func wxSDKClient(t *testing.T, b *wxBundle, tamper func([]byte) []byte, opts ...core.ClientOption) *core.Client {
	t.Helper()
	base, _ := url.Parse(b.srv.URL)
	all := []core.ClientOption{
		option.WithWechatPayPublicKeyAuthCipher(b.wk.MchID, b.wk.MerchantSerial, b.wk.MerchantPrivateKey, b.wk.PublicKeyID, b.wk.PlatformPublicKey),
		option.WithHTTPClient(&http.Client{Transport: wxToSimulator{base: base, tamper: tamper}, Timeout: 10 * time.Second}),
	}
	c, err := core.NewClient(context.Background(), append(all, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func wxSDKPrepay(b *wxBundle, no string, total int64) native.PrepayRequest {
	return native.PrepayRequest{
		Appid:       core.String(b.wk.AppID),
		Mchid:       core.String(b.wk.MchID),
		Description: core.String("奶茶 " + no),
		OutTradeNo:  core.String(no),
		TimeExpire:  core.Time(b.clock.Now().Add(time.Hour)),
		NotifyUrl:   core.String(""),
		Amount:      &native.Amount{Total: core.Int64(total), Currency: core.String("CNY")},
	}
}

// The official SDK verifies every answer of the simulator in public key mode, including the
// 204 of a close, and it verifies and decrypts the simulator's notifications.
func TestOfficialSDKAcceptsSimulatorSignatures(t *testing.T) {
	t.Parallel()
	b := wxSDKSetup(t, sim.Config{TimeScale: fastTime})
	ctx := context.Background()
	client := wxSDKClient(t, b, nil)
	svc := native.NativeApiService{Client: client}

	pre, _, err := svc.Prepay(ctx, wxSDKPrepay(b, "SDK_001", 1500))
	if err != nil || !strings.HasPrefix(*pre.CodeUrl, "weixin://wxpay/bizpayurl?pr=") {
		t.Fatalf("prepay: %v %v", pre, err)
	}
	txn, _, err := svc.QueryOrderByOutTradeNo(ctx, native.QueryOrderByOutTradeNoRequest{OutTradeNo: core.String("SDK_001"), Mchid: core.String(b.wk.MchID)})
	if err != nil || *txn.TradeState != "NOTPAY" {
		t.Fatalf("query: %v %v", txn, err)
	}
	if _, err := svc.CloseOrder(ctx, native.CloseOrderRequest{OutTradeNo: core.String("SDK_001"), Mchid: core.String(b.wk.MchID)}); err != nil {
		t.Fatalf("close (a signed 204): %v", err)
	}

	recv := newWxReceiver(t, reply{http.StatusNoContent, ""})
	req := wxSDKPrepay(b, "SDK_002", 2500)
	req.NotifyUrl = core.String(recv.url)
	pre, _, err = svc.Prepay(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	paid, err := b.sim.Pay(ctx, *pre.CodeUrl)
	if err != nil {
		t.Fatal(err)
	}
	txn, _, err = svc.QueryOrderById(ctx, native.QueryOrderByIdRequest{TransactionId: core.String(paid.TradeNo), Mchid: core.String(b.wk.MchID)})
	if err != nil || *txn.TradeState != "SUCCESS" || *txn.Amount.Total != 2500 || *txn.OutTradeNo != "SDK_002" {
		t.Fatalf("query by transaction_id: %v %v", txn, err)
	}
	refunds := refunddomestic.RefundsApiService{Client: client}
	r, _, err := refunds.Create(ctx, refunddomestic.CreateRequest{
		OutTradeNo: core.String("SDK_002"), OutRefundNo: core.String("SDK_002_R1"), Reason: core.String("退货"),
		Amount: &refunddomestic.AmountReq{Refund: core.Int64(500), Total: core.Int64(2500), Currency: core.String("CNY")},
	})
	if err != nil || *r.Status != refunddomestic.STATUS_SUCCESS || *r.Amount.Refund != 500 || r.SuccessTime == nil {
		t.Fatalf("refund: %v %v", r, err)
	}
	r, _, err = refunds.QueryByOutRefundNo(ctx, refunddomestic.QueryByOutRefundNoRequest{OutRefundNo: core.String("SDK_002_R1")})
	if err != nil || *r.RefundId == "" || *r.Channel != refunddomestic.CHANNEL_ORIGINAL {
		t.Fatalf("refund query: %v %v", r, err)
	}

	// The bill: a signed, verified tradebill answer, then an unsigned download that only a
	// client without validator (as the SDK's FAQ prescribes) reads.
	res, err := client.Get(ctx, "https://api.mch.weixin.qq.com/v3/bill/tradebill?bill_date=2025-03-13&bill_type=ALL")
	if err != nil {
		t.Fatalf("tradebill: %v", err)
	}
	var bill struct {
		DownloadURL string `json:"download_url"`
	}
	if err := core.UnMarshalResponse(res.Response, &bill); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Get(ctx, bill.DownloadURL); err == nil {
		t.Fatal("the validating client accepted the unsigned download")
	}
	raw := wxSDKClient(t, b, nil, option.WithoutValidator())
	res, err = raw.Get(ctx, bill.DownloadURL)
	if err != nil {
		t.Fatalf("download without validator: %v", err)
	}
	file, _ := io.ReadAll(res.Response.Body)
	if !strings.HasPrefix(string(file), "交易时间,") {
		t.Fatalf("bill file %q", file)
	}

	// The notification: verified and decrypted by the SDK's own handler.
	waitNotify(t, b.sim, "SDK_002")
	got := recv.received()[0]
	handler := notify.NewNotifyHandler(b.wk.APIv3Key, verifiers.NewSHA256WithRSAPubkeyVerifier(b.wk.PublicKeyID, *b.wk.PlatformPublicKey))
	var note payments.Transaction
	n, err := handler.ParseNotifyRequest(ctx, wxNotifyRequest(got.header, got.body), &note)
	if err != nil || n.EventType != "TRANSACTION.SUCCESS" || *note.TradeState != "SUCCESS" || *note.Amount.Total != 2500 ||
		*note.TransactionId != paid.TradeNo {
		t.Fatalf("notification: %+v %+v %v", n, note, err)
	}
}

func wxNotifyRequest(h http.Header, body []byte) *http.Request {
	req, _ := http.NewRequest(http.MethodPost, "/notify/wechat", bytes.NewReader(body))
	req.Header = h.Clone()
	return req
}

// And it refuses what was changed on the way: a flipped byte in an answer or a
// notification, an unsigned answer, one signed by a forger.
func TestOfficialSDKRejectsTamperedSimulatorAnswersAndNotifications(t *testing.T) {
	t.Parallel()
	b := wxSDKSetup(t, sim.Config{TimeScale: fastTime})
	ctx := context.Background()
	flip := func(body []byte) []byte {
		if len(body) == 0 {
			return body
		}
		out := append([]byte(nil), body...)
		out[len(out)/2] ^= 0x01
		return out
	}
	svc := native.NativeApiService{Client: wxSDKClient(t, b, flip)}
	if _, _, err := svc.Prepay(ctx, wxSDKPrepay(b, "TMP_001", 100)); err == nil {
		t.Fatal("the SDK accepted a prepay answer with a flipped byte")
	}
	if _, _, err := svc.QueryOrderByOutTradeNo(ctx, native.QueryOrderByOutTradeNoRequest{OutTradeNo: core.String("TMP_001"), Mchid: core.String(b.wk.MchID)}); err == nil {
		t.Fatal("the SDK accepted a query answer with a flipped byte")
	}
	// The prepay itself went through: only the answer was changed.
	if e := wxEntry(t, b.sim, "TMP_001"); e.Status != "NOTPAY" {
		t.Fatalf("ledger %+v", e)
	}

	honest := native.NativeApiService{Client: wxSDKClient(t, b, nil)}
	for _, kind := range []string{sim.FaultUnsigned, sim.FaultBadSignature} {
		if err := b.sim.SetFaults(sim.FaultPlan{Rules: []sim.FaultRule{{Channel: "wechat", Method: sim.MethodQuery, Kind: kind, Applied: true}}}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := honest.QueryOrderByOutTradeNo(ctx, native.QueryOrderByOutTradeNoRequest{OutTradeNo: core.String("TMP_001"), Mchid: core.String(b.wk.MchID)}); err == nil {
			t.Fatalf("the SDK accepted a %s answer", kind)
		}
	}
	_ = b.sim.SetFaults(sim.FaultPlan{})

	recv := newWxReceiver(t, reply{http.StatusNoContent, ""})
	req := wxSDKPrepay(b, "TMP_002", 100)
	req.NotifyUrl = core.String(recv.url)
	pre, _, err := honest.Prepay(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.sim.Pay(ctx, *pre.CodeUrl); err != nil {
		t.Fatal(err)
	}
	waitNotify(t, b.sim, "TMP_002")
	got := recv.received()[0]
	handler := notify.NewNotifyHandler(b.wk.APIv3Key, verifiers.NewSHA256WithRSAPubkeyVerifier(b.wk.PublicKeyID, *b.wk.PlatformPublicKey))
	var txn payments.Transaction
	if _, err := handler.ParseNotifyRequest(ctx, wxNotifyRequest(got.header, got.body), &txn); err != nil {
		t.Fatalf("the genuine notification: %v", err)
	}
	changed := bytes.Replace(got.body, []byte(`"summary":"支付成功"`), []byte(`"summary":"支付失败"`), 1)
	if bytes.Equal(changed, got.body) {
		t.Fatal("test bug: nothing changed")
	}
	if _, err := handler.ParseNotifyRequest(ctx, wxNotifyRequest(got.header, changed), &txn); err == nil {
		t.Fatal("the SDK accepted a notification with a changed body")
	}
}
