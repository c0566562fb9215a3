package wechat_test

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
	"orderpay/channel/sim/simtest"
	"orderpay/channel/wechat"
)

// downloads is how many certificate downloads the adapter started, as Describe says.
func downloads(t *testing.T, ch *wechat.Channel) int {
	t.Helper()
	pc := ch.Describe().PlatformCertificates
	if pc == nil {
		t.Fatal("Describe shows no platform certificates in certificate mode")
	}
	return pc.Downloads
}

// certs is what Describe shows of the platform certificates: their serials, the newest
// first, comma-separated, and the rest of the store's state ("" for each in pubkey mode).
func certs(d orderpay.ChannelDescription) (serials string, pc orderpay.PlatformCertificates) {
	if d.PlatformCertificates == nil {
		return "", pc
	}
	var s []string
	for _, c := range d.PlatformCertificates.Certificates {
		s = append(s, c.Serial)
	}
	return strings.Join(s, ","), *d.PlatformCertificates
}

func fingerprint(t *testing.T, cert *x509.Certificate) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(cert.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// noSecrets fails the test if a description shows key material.
func noSecrets(t *testing.T, d orderpay.ChannelDescription, keys *sim.Keys) {
	t.Helper()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if v := string(b); strings.Contains(v, keys.Wechat.APIv3Key) || strings.Contains(v, "PRIVATE") || strings.Contains(v, "BEGIN") {
		t.Fatalf("Describe() shows key material: %s", v)
	}
}

// In platform certificate mode New makes no call; the first answer makes the adapter
// download the certificates, and then it verifies with them; Describe shows what it uses.
func TestCertificateMode_DownloadsOnFirstUseAndDescribesWhatItVerifiesWith(t *testing.T) {
	t.Parallel()
	e := certSetup(t, nil)
	wk := &e.keys.Wechat
	d := e.ch.Describe()
	if serials, pc := certs(d); d.Mode != "certificate" || d.PlatformCertificates == nil || serials != "" || pc.Downloads != 0 ||
		d.MchID != wk.MchID || d.MerchantSerial != wk.MerchantSerial || pc.RefreshIntervalSeconds != 24*3600 {
		t.Fatalf("before any call: %+v", d)
	}
	m := newMerchant(t, e.ch)
	pre := e.accepted(t, tradeNo("CM"), 1500, m.srv.URL)
	if _, err := e.sim.Pay(context.Background(), pre.QRCode); err != nil {
		t.Fatal(err)
	}
	if _, ns, errs := m.wait(t, 1); errs[0] != nil || ns[0].Outcome != orderpay.OutcomePaid {
		t.Fatalf("notification in certificate mode: %+v %v", ns[0], errs[0])
	}
	d = e.ch.Describe()
	if serials, pc := certs(d); serials != wk.PlatformSerial || pc.Downloads != 1 ||
		pc.Certificates[0].PublicKeySHA256 != fingerprint(t, wk.PlatformCertificate) ||
		pc.DownloadedAt == nil || pc.DownloadError != "" || d.PublicKeyID != "" {
		t.Fatalf("after the first calls: %+v", d)
	}
	noSecrets(t, d, e.keys)

	// Public key mode describes its key instead.
	pk := e.keys.Wechat.PlatformPublicKey
	der, _ := x509.MarshalPKIXPublicKey(pk)
	sum := sha256.Sum256(der)
	d = newChannel(t, e.keys, e.srv.URL).Describe()
	if d.Mode != "pubkey" || d.PublicKeyID != wk.PublicKeyID || d.PublicKeySHA256 != hex.EncodeToString(sum[:]) ||
		d.PlatformCertificates != nil {
		t.Fatalf("public key mode: %+v", d)
	}
	noSecrets(t, d, e.keys)
}

// An adapter in one mode against a merchant in the other verifies nothing, so every answer
// is Unknown, never believed; the certificate mode adapter says why.
func TestCertificateMode_AgainstAMerchantInTheOtherModeEverythingIsUnknown(t *testing.T) {
	t.Parallel()
	pubkeyMerchant := setup(t)
	ch := newChannel(t, pubkeyMerchant.keys, pubkeyMerchant.srv.URL, certificateMode)
	res := ch.Precreate(context.Background(), orderpay.PrecreateRequest{OutTradeNo: tradeNo("MM"), Amount: 100, Subject: "x", Deadline: pubkeyMerchant.clock.Now().Add(time.Hour)})
	if res.Outcome != orderpay.OutcomeUnknown {
		t.Fatalf("certificate adapter, public key merchant: %+v", res)
	}
	if _, pc := certs(ch.Describe()); !strings.Contains(pc.DownloadError, "RESOURCE_NOT_EXISTS") || !strings.Contains(pc.DownloadError, `mode "pubkey"`) {
		t.Fatalf("Describe %+v does not say the merchant has no certificates", pc)
	}

	certMerchant := certSetup(t, nil)
	pub := newChannel(t, certMerchant.keys, certMerchant.srv.URL)
	if res := pub.Precreate(context.Background(), orderpay.PrecreateRequest{OutTradeNo: tradeNo("MM"), Amount: 100, Subject: "x", Deadline: certMerchant.clock.Now().Add(time.Hour)}); res.Outcome != orderpay.OutcomeUnknown {
		t.Fatalf("public key adapter, certificate merchant: %+v", res)
	}
}

// A certificate list the adapter cannot trust teaches it nothing: one signed by a forger, or
// one not encrypted with our APIv3 key. Answers under certificates it could not learn stay
// Unknown; once a genuine list comes, they verify.
func TestCertificateMode_UntrustworthyListsAreRefused(t *testing.T) {
	t.Parallel()
	t.Run("forged signature", func(t *testing.T) {
		t.Parallel()
		e := certSetup(t, nil, func(c *wechat.Config) { c.CertificateDownloadGap = 50 * time.Millisecond })
		if err := e.sim.SetFaults(sim.FaultPlan{Rules: []sim.FaultRule{{Channel: "wechat", Method: sim.MethodCertificates, Kind: sim.FaultBadSignature, Limit: 1}}}); err != nil {
			t.Fatal(err)
		}
		no := tradeNo("FL")
		if res := e.precreate(t, no, 100, e.clock.Now().Add(time.Hour), ""); res.Outcome != orderpay.OutcomeUnknown {
			t.Fatalf("precreate while the only list is forged: %+v", res)
		}
		if serials, pc := certs(e.ch.Describe()); serials != "" || !strings.Contains(pc.DownloadError, "not signed") {
			t.Fatalf("after a forged list: %+v", pc)
		}
		time.Sleep(60 * time.Millisecond) // the gap
		if q := e.ch.Query(context.Background(), no); q.Outcome != orderpay.OutcomeNotPaid {
			t.Fatalf("query once the list is genuine: %+v", q)
		}
	})
	t.Run("another APIv3 key", func(t *testing.T) {
		t.Parallel()
		keys, _ := simtest.Keys(t)
		other := *keys
		other.Wechat.APIv3Key = strings.Repeat("k", 32)
		e := certSetup(t, func(c *sim.Config) { c.Keys = &other })
		if res := e.precreate(t, tradeNo("AK"), 100, e.clock.Now().Add(time.Hour), ""); res.Outcome != orderpay.OutcomeUnknown {
			t.Fatalf("precreate with a list encrypted for someone else: %+v", res)
		}
		if serials, pc := certs(e.ch.Describe()); serials != "" || !strings.Contains(pc.DownloadError, "APIv3") {
			t.Fatalf("after a list for another key: %+v", pc)
		}
	})
}

// Notifications under serials WeChat never issued are refused, and however many arrive at
// once, the adapter downloads the list only a few times: at most one download starts per
// gap, and one download serves every caller waiting for it.
func TestCertificateMode_MadeUpSerialsAreRefusedWithFewDownloads(t *testing.T) {
	t.Parallel()
	const gap = 300 * time.Millisecond
	e := certSetup(t, nil, func(c *wechat.Config) { c.CertificateDownloadGap = gap })
	_, forger := simtest.Keys(t)
	g := genuineNotification(t, e) // one download, to learn the genuine certificate
	if _, pc := certs(e.ch.Describe()); pc.Downloads != 1 {
		t.Fatalf("downloads after the genuine notification: %+v", pc)
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range errs {
		wg.Go(func() {
			serial := fmt.Sprintf("%040X", 0x5EED0000+i)
			h := signHeaders(t, forger, serial, time.Now(), g.body)
			_, errs[i] = e.ch.VerifyNotification(context.Background(), h, g.body)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if orderpay.ErrorCode(err) != orderpay.EUNAUTHORIZED {
			t.Fatalf("notification %d under a made-up serial: %v, want EUNAUTHORIZED", i, err)
		}
	}
	elapsed := time.Since(start)
	// Downloads start at least a gap apart: the first one, and one per gap since.
	if got, most := downloads(t, e.ch), 2+int(elapsed/gap); got > most {
		t.Fatalf("%d downloads in %v for 20 forged notifications, want at most %d", got, elapsed, most)
	}
	if elapsed > 3*gap+2*time.Second {
		t.Fatalf("refusing 20 forged notifications took %v", elapsed)
	}
	// The genuine one still verifies, without a download.
	before := downloads(t, e.ch)
	if n, err := e.ch.VerifyNotification(context.Background(), g.header, g.body); err != nil || n.Outcome != orderpay.OutcomePaid {
		t.Fatalf("genuine notification: %+v %v", n, err)
	}
	if after := downloads(t, e.ch); after != before {
		t.Fatalf("a known serial made a download: %d then %d", before, after)
	}
}

// The list is downloaded again after the refresh interval even when every answer names a
// known certificate; a download that fails then keeps the certificates known.
func TestCertificateMode_RefreshedPeriodically(t *testing.T) {
	t.Parallel()
	e := certSetup(t, nil, func(c *wechat.Config) {
		c.CertificateRefreshInterval = 100 * time.Millisecond
		c.CertificateDownloadGap = time.Millisecond
	})
	no := e.paid(t, 100)
	if _, pc := certs(e.ch.Describe()); pc.Downloads != 1 {
		t.Fatalf("after the first calls: %+v", pc)
	}
	time.Sleep(120 * time.Millisecond)
	if q := e.ch.Query(context.Background(), no); q.Outcome != orderpay.OutcomePaid {
		t.Fatalf("query: %+v", q)
	}
	if _, pc := certs(e.ch.Describe()); pc.Downloads != 2 || pc.DownloadError != "" {
		t.Fatalf("after the interval: %+v", pc)
	}
	time.Sleep(120 * time.Millisecond)
	if err := e.sim.SetFaults(sim.FaultPlan{Rules: []sim.FaultRule{{Channel: "wechat", Method: sim.MethodCertificates, Kind: sim.FaultSystemError, Limit: 1}}}); err != nil {
		t.Fatal(err)
	}
	if q := e.ch.Query(context.Background(), no); q.Outcome != orderpay.OutcomePaid {
		t.Fatalf("query while the refresh fails: %+v", q)
	}
	if serials, pc := certs(e.ch.Describe()); pc.Downloads != 3 || !strings.Contains(pc.DownloadError, "SYSTEM_ERROR") ||
		serials != e.keys.Wechat.PlatformSerial {
		t.Fatalf("after a failed refresh: %+v", pc)
	}
}

// Exactly one verification mode per config; anything else is refused by New, naming what
// is wrong and no key material.
func TestNew_ExactlyOneVerificationMode(t *testing.T) {
	t.Parallel()
	keys, _ := simtest.Keys(t)
	pub := channelConfig(t, keys, "")
	cert := pub
	certificateMode(&cert)
	for name, cfg := range map[string]wechat.Config{"public key": pub, "platform certificate": cert} {
		if _, err := wechat.New(cfg); err != nil {
			t.Fatalf("%s mode: %v", name, err)
		}
	}
	for name, tc := range map[string]struct {
		base wechat.Config
		mod  func(*wechat.Config)
		says string
	}{
		"certificate mode with a public key":       {cert, func(c *wechat.Config) { c.PlatformPublicKeyPEM = pub.PlatformPublicKeyPEM }, "PlatformPublicKeyPEM"},
		"certificate mode with a public key id":    {cert, func(c *wechat.Config) { c.PublicKeyID = pub.PublicKeyID }, "PublicKeyID"},
		"public key mode without the key":          {pub, func(c *wechat.Config) { c.PlatformPublicKeyPEM = "" }, "PlatformPublicKeyPEM"},
		"public key mode without the id":           {pub, func(c *wechat.Config) { c.PublicKeyID = "" }, "PublicKeyID"},
		"public key mode with a refresh interval":  {pub, func(c *wechat.Config) { c.CertificateRefreshInterval = time.Hour }, "platform certificate mode"},
		"an unknown mode":                          {pub, func(c *wechat.Config) { c.Mode = "both" }, "Mode"},
		"a negative download gap":                  {cert, func(c *wechat.Config) { c.CertificateDownloadGap = -time.Second }, "CertificateDownloadGap"},
		"certificate mode with a short APIv3 key":  {cert, func(c *wechat.Config) { c.APIv3Key = "short" }, "APIv3Key"},
		"a refund notify URL with a query":         {pub, func(c *wechat.Config) { c.RefundNotifyURL = "https://m.example/n?a=1" }, "RefundNotifyURL"},
		"a refund notify URL that is not absolute": {pub, func(c *wechat.Config) { c.RefundNotifyURL = "/notify/wechat" }, "RefundNotifyURL"},
	} {
		cfg := tc.base
		tc.mod(&cfg)
		_, err := wechat.New(cfg)
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want an error naming %s", name, err, tc.says)
		} else if strings.Contains(err.Error(), "PRIVATE KEY") || strings.Contains(err.Error(), "PUBLIC KEY-----") || strings.Contains(err.Error(), keys.Wechat.APIv3Key) {
			t.Errorf("%s: the error shows key material: %v", name, err)
		}
	}
}
