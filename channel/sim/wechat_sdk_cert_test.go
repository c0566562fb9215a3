package sim_test

import (
	"context"
	"crypto/x509"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/wechatpay-apiv3/wechatpay-go/core"
	"github.com/wechatpay-apiv3/wechatpay-go/core/auth/verifiers"
	"github.com/wechatpay-apiv3/wechatpay-go/core/downloader"
	"github.com/wechatpay-apiv3/wechatpay-go/core/notify"
	"github.com/wechatpay-apiv3/wechatpay-go/core/option"
	"github.com/wechatpay-apiv3/wechatpay-go/services/payments"
	"github.com/wechatpay-apiv3/wechatpay-go/services/payments/native"
	"github.com/wechatpay-apiv3/wechatpay-go/services/refunddomestic"

	"orderpay/channel/sim"
)

// The SDK with a platform certificate loaded from a file (the keys dir's wechatpay_cert.pem)
// verifies a certificate mode simulator's answers, and refuses them in public key mode.
func TestOfficialSDKWithALocalPlatformCertificate(t *testing.T) {
	t.Parallel()
	for _, mode := range []sim.WechatMode{sim.WechatModeCertificate, sim.WechatModePublicKey} {
		b := wxSDKSetup(t, sim.Config{WechatMode: mode})
		client := wxSDKClient(t, b, nil,
			option.WithWechatPayAuthCipher(b.wk.MchID, b.wk.MerchantSerial, b.wk.MerchantPrivateKey, []*x509.Certificate{b.wk.PlatformCertificate}))
		svc := native.NativeApiService{Client: client}
		_, _, err := svc.Prepay(context.Background(), wxSDKPrepay(b, "LCL_001", 300))
		if (err == nil) != (mode == sim.WechatModeCertificate) {
			t.Fatalf("%s mode: prepay verified with the platform certificate: %v", mode, err)
		}
	}
}

// sdkAutoChildEnv marks the child process of TestOfficialSDKAutoCertificateDownload.
const sdkAutoChildEnv = "ORDERPAY_SIM_SDK_AUTO_CERT_CHILD"

// A merchant's usual setup in platform certificate mode works against the simulator:
// option.WithWechatPayAutoAuthCipher downloads the certificates from GET /v3/certificates
// (decrypting them with the APIv3 key), verifies prepay, query and refund answers with them,
// and the SDK's notify handler built on the downloaded certificates verifies and decrypts
// the payment's and the refund's notifications.
//
// That option registers the merchant with the SDK's process-wide downloader manager, whose
// client sends to https://api.mch.weixin.qq.com through http.DefaultTransport. So the test
// runs in a child process of its own, where replacing http.DefaultTransport and filling the
// singleton touch no other test.
func TestOfficialSDKAutoCertificateDownload(t *testing.T) {
	if os.Getenv(sdkAutoChildEnv) != "1" {
		t.Parallel()
		cmd := exec.Command(os.Args[0], "-test.run=^TestOfficialSDKAutoCertificateDownload$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), sdkAutoChildEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestOfficialSDKAutoCertificateDownload") {
			t.Fatalf("the isolated run: %v\n%s", err, out)
		}
		return
	}

	b := wxSDKSetup(t, sim.Config{TimeScale: fastTime, WechatMode: sim.WechatModeCertificate})
	base, _ := url.Parse(b.srv.URL)
	http.DefaultTransport = wxToSimulator{base: base, next: http.DefaultTransport}
	ctx := context.Background()

	// Exactly as a merchant writes it: no certificate, only the APIv3 key.
	client, err := core.NewClient(ctx, option.WithWechatPayAutoAuthCipher(b.wk.MchID, b.wk.MerchantSerial, b.wk.MerchantPrivateKey, b.wk.APIv3Key))
	if err != nil {
		t.Fatalf("the SDK could not download the platform certificates: %v", err)
	}
	certs := downloader.MgrInstance().GetCertificateMap(ctx, b.wk.MchID)
	if len(certs) != 1 || certs[b.wk.PlatformSerial] == nil || !certs[b.wk.PlatformSerial].Equal(b.wk.PlatformCertificate) {
		t.Fatalf("downloaded %v, want the platform certificate %s", certs, b.wk.PlatformSerial)
	}

	recv := newWxReceiver(t, reply{http.StatusNoContent, ""})
	svc := native.NativeApiService{Client: client}
	req := wxSDKPrepay(b, "AUTO_001", 2500)
	req.NotifyUrl = core.String(recv.url)
	pre, _, err := svc.Prepay(ctx, req)
	if err != nil {
		t.Fatalf("prepay: %v", err)
	}
	paid, err := b.sim.Pay(ctx, *pre.CodeUrl)
	if err != nil {
		t.Fatal(err)
	}
	txn, _, err := svc.QueryOrderByOutTradeNo(ctx, native.QueryOrderByOutTradeNoRequest{OutTradeNo: core.String("AUTO_001"), Mchid: core.String(b.wk.MchID)})
	if err != nil || *txn.TradeState != "SUCCESS" || *txn.TransactionId != paid.TradeNo {
		t.Fatalf("query: %v %v", txn, err)
	}
	r, _, err := (&refunddomestic.RefundsApiService{Client: client}).Create(ctx, refunddomestic.CreateRequest{
		OutTradeNo: core.String("AUTO_001"), OutRefundNo: core.String("AUTO_001_R1"), NotifyUrl: core.String(recv.url),
		Amount: &refunddomestic.AmountReq{Refund: core.Int64(500), Total: core.Int64(2500), Currency: core.String("CNY")},
	})
	if err != nil || *r.Status != refunddomestic.STATUS_SUCCESS || *r.Amount.Refund != 500 {
		t.Fatalf("refund: %v %v", r, err)
	}

	// The notification, through the SDK's handler on the downloaded certificates.
	// The refund's notification may arrive before the payment's (which the simulator may
	// be retrying): the payment's is the one about the transaction.
	waitNotify(t, b.sim, "AUTO_001")
	handler, err := notify.NewRSANotifyHandler(b.wk.APIv3Key, verifiers.NewSHA256WithRSAVerifier(downloader.MgrInstance().GetCertificateVisitor(b.wk.MchID)))
	if err != nil {
		t.Fatal(err)
	}
	var note payments.Transaction
	var n *notify.Request
	for _, got := range recv.received() {
		if got.header.Get("Wechatpay-Serial") != b.wk.PlatformSerial {
			t.Fatalf("notification under %q", got.header.Get("Wechatpay-Serial"))
		}
		var one payments.Transaction
		if parsed, err := handler.ParseNotifyRequest(ctx, wxNotifyRequest(got.header, got.body), &one); err == nil && parsed.Resource.OriginalType == "transaction" {
			n, note = parsed, one
			break
		}
	}
	if n == nil || n.EventType != "TRANSACTION.SUCCESS" || *note.TransactionId != paid.TradeNo || *note.Amount.Total != 2500 {
		t.Fatalf("payment notification: %+v %+v among %d received", n, note, len(recv.received()))
	}
	// And the refund's notification, through the same handler.
	waitRefundNotify(t, b.sim, "AUTO_001_R1")
	for _, d := range recv.received() {
		var refund map[string]any
		n, err := handler.ParseNotifyRequest(ctx, wxNotifyRequest(d.header, d.body), &refund)
		if err != nil {
			t.Fatalf("a notification the SDK refused: %v", err)
		}
		if n.Resource.OriginalType == "refund" && (n.EventType != "REFUND.SUCCESS" || refund["out_refund_no"] != "AUTO_001_R1" || refund["refund_status"] != "SUCCESS") {
			t.Fatalf("refund notification: %+v %v", n, refund)
		}
	}
	if len(recv.received()) != 2 {
		t.Fatalf("%d notifications, want the payment's and the refund's", len(recv.received()))
	}
}
