package sim_test

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/wechatpay-apiv3/wechatpay-go/utils"

	"orderpay"
	"orderpay/channel/sim"
)

// wxCertSetup starts a simulator in platform certificate mode (see wxSetup).
func wxCertSetup(t *testing.T, cfg sim.Config) *wxBundle {
	t.Helper()
	cfg.WechatMode = sim.WechatModeCertificate
	return wxSetup(t, cfg)
}

// wxDownloaded is GET /v3/certificates as a merchant reads it: every entry decrypted with
// the APIv3 key and parsed, by serial, in the order listed.
type wxDownloaded struct {
	serials []string
	certs   map[string]*x509.Certificate
}

// downloadCertificates calls GET /v3/certificates, checks each entry's shape and
// encryption (§E) and that the answer is signed by one of the certificates it lists.
func (b *wxBundle) downloadCertificates(t *testing.T) wxDownloaded {
	t.Helper()
	a := b.do(t, wxRequest{method: http.MethodGet, uri: "/v3/certificates"})
	if a.status != http.StatusOK {
		t.Fatalf("GET /v3/certificates: %s", a)
	}
	var list struct {
		Data []struct {
			SerialNo           string `json:"serial_no"`
			EffectiveTime      string `json:"effective_time"`
			ExpireTime         string `json:"expire_time"`
			EncryptCertificate struct {
				Algorithm      string `json:"algorithm"`
				Nonce          string `json:"nonce"`
				AssociatedData string `json:"associated_data"`
				Ciphertext     string `json:"ciphertext"`
			} `json:"encrypt_certificate"`
		} `json:"data"`
	}
	if err := json.Unmarshal(a.body, &list); err != nil || len(list.Data) == 0 {
		t.Fatalf("certificates %s: %v", a, err)
	}
	d := wxDownloaded{certs: map[string]*x509.Certificate{}}
	for _, e := range list.Data {
		ec := e.EncryptCertificate
		if !regexp.MustCompile(`^[0-9A-F]{40}$`).MatchString(e.SerialNo) || ec.Algorithm != "AEAD_AES_256_GCM" ||
			ec.AssociatedData != "certificate" || len(ec.Nonce) != 12 {
			t.Fatalf("certificate entry %+v", e)
		}
		pemText, err := sim.DecryptWechatResource(b.wk.APIv3Key, ec.Ciphertext, ec.AssociatedData, ec.Nonce)
		if err != nil {
			t.Fatalf("certificate %s does not decrypt with the APIv3 key: %v", e.SerialNo, err)
		}
		cert, err := utils.LoadCertificate(string(pemText))
		if err != nil || utils.GetCertificateSerialNumber(*cert) != e.SerialNo {
			t.Fatalf("certificate %s: %v", e.SerialNo, err)
		}
		if cert.CheckSignatureFrom(b.wk.PlatformCACertificate) != nil {
			t.Fatalf("certificate %s is not the simulated CA's", e.SerialNo)
		}
		effective, err1 := time.Parse(time.RFC3339, e.EffectiveTime)
		expire, err2 := time.Parse(time.RFC3339, e.ExpireTime)
		if err1 != nil || err2 != nil || !effective.Equal(cert.NotBefore) || !expire.Equal(cert.NotAfter) {
			t.Fatalf("certificate %s: effective %q expire %q, want the certificate's %v–%v", e.SerialNo, e.EffectiveTime, e.ExpireTime, cert.NotBefore, cert.NotAfter)
		}
		d.serials = append(d.serials, e.SerialNo)
		d.certs[e.SerialNo] = cert
	}
	if err := verifyCertSigned(d.certs, a.header, a.body, b.wallClock.Now()); err != nil {
		t.Fatalf("the certificates answer: %v", err)
	}
	return d
}

// verifyCertSigned checks an answer's or notification's signature as a merchant in
// certificate mode does: the certificate named by Wechatpay-Serial, over
// "timestamp\nnonce\nbody\n", within 5 minutes.
func verifyCertSigned(certs map[string]*x509.Certificate, h http.Header, body []byte, now time.Time) error {
	cert := certs[h.Get("Wechatpay-Serial")]
	ts, err := strconv.ParseInt(h.Get("Wechatpay-Timestamp"), 10, 64)
	switch {
	case cert == nil:
		return fmt.Errorf("Wechatpay-Serial %q is none of the certificates", h.Get("Wechatpay-Serial"))
	case err != nil || now.Sub(time.Unix(ts, 0)).Abs() >= 5*time.Minute:
		return fmt.Errorf("bad Wechatpay-Timestamp %q", h.Get("Wechatpay-Timestamp"))
	case h.Get("Wechatpay-Signature-Type") != "WECHATPAY2-SHA256-RSA2048":
		return fmt.Errorf("Wechatpay-Signature-Type %q", h.Get("Wechatpay-Signature-Type"))
	}
	msg := h.Get("Wechatpay-Timestamp") + "\n" + h.Get("Wechatpay-Nonce") + "\n" + string(body) + "\n"
	return sim.VerifySHA256RSA(cert.PublicKey.(*rsa.PublicKey), []byte(msg), h.Get("Wechatpay-Signature"))
}

// A merchant in public key mode has no platform certificates: the download is refused as
// WeChat refuses it, and every answer names the public key id whatever the request asks.
func TestWechatCertificates_PublicKeyModeHasNone(t *testing.T) {
	t.Parallel()
	b := wxSetup(t, sim.Config{})
	wantWxError(t, "certificates in public key mode", b.do(t, wxRequest{method: http.MethodGet, uri: "/v3/certificates"}),
		http.StatusNotFound, "RESOURCE_NOT_EXISTS")
	wantWxError(t, "unsigned certificates request", b.do(t, wxRequest{method: http.MethodGet, uri: "/v3/certificates", noAuth: true}),
		http.StatusUnauthorized, "SIGN_ERROR")

	// A client that names the platform certificate still gets answers under the public key.
	b.prepay(t, "PKM_001", 100, time.Time{}, "")
	q := b.do(t, wxRequest{method: http.MethodGet, uri: "/v3/pay/transactions/out-trade-no/PKM_001?mchid=" + b.wk.MchID,
		header: http.Header{"Wechatpay-Serial": {b.wk.PlatformSerial}}})
	if q.status != http.StatusOK || b.verifyAnswer(q) != nil {
		t.Fatalf("query naming the certificate: %s under %q, want 200 under the public key id", q, q.header.Get("Wechatpay-Serial"))
	}

	if _, err := b.sim.RotateWechatCertificate(); orderpay.ErrorCode(err) != orderpay.ECONFLICT {
		t.Fatalf("rotation in public key mode: %v, want ECONFLICT", err)
	}
	resp, err := http.Post(b.srv.URL+"/sim/wechat/certificates", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("POST /sim/wechat/certificates in public key mode: %d, want 409", resp.StatusCode)
	}
	var st struct {
		Mode         string            `json:"mode"`
		PublicKeyID  string            `json:"public_key_id"`
		Certificates []json.RawMessage `json:"certificates"`
	}
	getJSON(t, b.srv.URL+"/sim/wechat/certificates", &st)
	if st.Mode != "pubkey" || st.PublicKeyID != b.wk.PublicKeyID || len(st.Certificates) != 0 {
		t.Fatalf("status %+v", st)
	}
}

// In certificate mode GET /v3/certificates lists the platform certificate, encrypted with
// the APIv3 key, in an answer signed by it; every answer and notification is signed with
// its key and names its serial.
func TestWechatCertificates_CertificateModeListsAndSignsWithThePlatformCertificate(t *testing.T) {
	t.Parallel()
	b := wxCertSetup(t, sim.Config{TimeScale: fastTime})
	d := b.downloadCertificates(t)
	if len(d.serials) != 1 || d.serials[0] != b.wk.PlatformSerial || !d.certs[b.wk.PlatformSerial].Equal(b.wk.PlatformCertificate) {
		t.Fatalf("listed %v, want only the keys' certificate %s", d.serials, b.wk.PlatformSerial)
	}
	wantWxError(t, "certificates signed by another merchant key",
		b.do(t, wxRequest{method: http.MethodGet, uri: "/v3/certificates", signKey: b.wk.PlatformCertificateKey}),
		http.StatusUnauthorized, "SIGN_ERROR")

	recv := newWxReceiver(t, reply{http.StatusNoContent, ""})
	pre := b.do(t, wxRequest{method: http.MethodPost, uri: "/v3/pay/transactions/native", body: b.prepayBody("CRT_001", 500, time.Time{}, recv.url)})
	for _, a := range []wxAnswer{
		pre,
		b.do(t, wxRequest{method: http.MethodGet, uri: "/v3/pay/transactions/out-trade-no/CRT_001?mchid=" + b.wk.MchID}),
		b.do(t, wxRequest{method: http.MethodPost, uri: "/v3/pay/transactions/native", body: b.prepayBody("CRT_002", 900, time.Time{}, "")}),
		b.do(t, wxRequest{method: http.MethodPost, uri: "/v3/pay/transactions/out-trade-no/CRT_002/close", body: `{"mchid":"` + b.wk.MchID + `"}`}),
	} {
		if a.status/100 != 2 || a.header.Get("Wechatpay-Serial") != b.wk.PlatformSerial {
			t.Fatalf("answer %s under %q, want a 2xx under the certificate's serial", a, a.header.Get("Wechatpay-Serial"))
		}
		if err := verifyCertSigned(d.certs, a.header, a.body, b.wallClock.Now()); err != nil {
			t.Fatalf("answer %s: %v", a, err)
		}
		if b.verifyAnswer(a) == nil {
			t.Fatal("a certificate mode answer verified with the public key")
		}
	}
	if _, err := b.sim.Pay(context.Background(), pre.json(t)["code_url"].(string)); err != nil {
		t.Fatal(err)
	}
	waitNotify(t, b.sim, "CRT_001")
	got := recv.received()[0]
	if err := verifyCertSigned(d.certs, got.header, got.body, b.wallClock.Now()); err != nil {
		t.Fatalf("notification: %v", err)
	}
}

// A rotation (by the control route, the Go method, or the clock with WechatCertRotateEvery)
// lists the new certificate at once, as WeChat does ten days before the old one expires; for
// the next five days (WechatCertLead) the old one alone still signs; then both sign, mixed,
// for the overlap; after it only the new one signs and is listed.
func TestWechatCertificates_RotationListsAtOnceSignsAfterTheLeadMixesThenOnlyTheNew(t *testing.T) {
	t.Parallel()
	b := wxCertSetup(t, sim.Config{TimeScale: fastTime, WechatCertOverlap: time.Hour})
	old := b.wk.PlatformSerial

	// Rotate through the control route.
	resp, err := http.Post(b.srv.URL+"/sim/wechat/certificates", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Mode         string `json:"mode"`
		Overlap      string `json:"overlap"`
		Certificates []struct {
			SerialNo  string     `json:"serial_no"`
			SignsFrom *time.Time `json:"signs_from"`
			RetiresAt *time.Time `json:"retires_at"`
		} `json:"certificates"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /sim/wechat/certificates: %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	signsFrom := b.clock.Now().Add(sim.WechatCertLead)
	if st.Mode != "certificate" || st.Overlap != "1h0m0s" || len(st.Certificates) != 2 || st.Certificates[1].SerialNo != old ||
		st.Certificates[0].RetiresAt != nil || st.Certificates[0].SignsFrom == nil || !st.Certificates[0].SignsFrom.Equal(signsFrom) ||
		st.Certificates[1].RetiresAt == nil || !st.Certificates[1].RetiresAt.Equal(signsFrom.Add(time.Hour)) {
		t.Fatalf("after a rotation: %+v, want the new certificate first, signing in 5 days, and the old one retiring an hour later", st)
	}
	fresh := st.Certificates[0].SerialNo

	// Listed at once, with the old one.
	d := b.downloadCertificates(t)
	if len(d.serials) != 2 || d.serials[0] != fresh || d.serials[1] != old {
		t.Fatalf("listed %v, want [%s %s]", d.serials, fresh, old)
	}
	if !d.certs[fresh].NotBefore.After(d.certs[old].NotBefore) {
		t.Fatal("the new certificate does not start after the old one: SDKs would not take it as the newest")
	}
	recv := newWxReceiver(t, reply{http.StatusNoContent, ""})
	// trade places and pays one order, and counts the serials of its answer and, once
	// notified, of its notification.
	trade := func(no string, seen map[string]int) {
		t.Helper()
		a := b.do(t, wxRequest{method: http.MethodPost, uri: "/v3/pay/transactions/native", body: b.prepayBody(no, 100, time.Time{}, recv.url)})
		if err := verifyCertSigned(d.certs, a.header, a.body, b.wallClock.Now()); err != nil {
			t.Fatalf("answer to %s: %v", no, err)
		}
		seen[a.header.Get("Wechatpay-Serial")]++
		var c struct {
			CodeURL string `json:"code_url"`
		}
		_ = json.Unmarshal(a.body, &c)
		if _, err := b.sim.Pay(context.Background(), c.CodeURL); err != nil {
			t.Fatal(err)
		}
		waitNotify(t, b.sim, no)
	}
	notified := func(seen map[string]int, from int) int {
		t.Helper()
		got := recv.received()
		for _, n := range got[from:] {
			if err := verifyCertSigned(d.certs, n.header, n.body, b.wallClock.Now()); err != nil {
				t.Fatalf("notification: %v", err)
			}
			seen[n.header.Get("Wechatpay-Serial")]++
		}
		return len(got)
	}

	// The lead: listed, but the old one alone signs.
	lead := map[string]int{}
	for i := range 4 {
		trade(fmt.Sprintf("LEAD_%03d", i), lead)
	}
	n := notified(lead, 0)
	if len(lead) != 1 || lead[old] != 8 {
		t.Fatalf("signatures during the lead by serial %v, want the old certificate's alone", lead)
	}

	// Five days on: both sign, mixed, each answer verifying under the serial it names.
	b.clock.Advance(sim.WechatCertLead)
	if l := b.sim.WechatCertificates(); len(l) != 2 || l[0].SignsFrom != nil {
		t.Fatalf("listed at the overlap: %+v", l)
	}
	seen := map[string]int{}
	for i := range 6 {
		trade(fmt.Sprintf("ROT_%03d", i), seen)
	}
	notified(seen, n)
	if seen[old] == 0 || seen[fresh] == 0 {
		t.Fatalf("signatures during the overlap by serial %v, want both certificates", seen)
	}

	// After the overlap: only the new one, listed and signing.
	b.clock.Advance(time.Hour)
	d = b.downloadCertificates(t)
	if len(d.serials) != 1 || d.serials[0] != fresh {
		t.Fatalf("listed after the overlap %v, want only %s", d.serials, fresh)
	}
	for range 4 {
		a := b.do(t, wxRequest{method: http.MethodGet, uri: "/v3/pay/transactions/out-trade-no/ROT_000?mchid=" + b.wk.MchID})
		if a.header.Get("Wechatpay-Serial") != fresh || verifyCertSigned(d.certs, a.header, a.body, b.wallClock.Now()) != nil {
			t.Fatalf("answer after the overlap under %q, want %s", a.header.Get("Wechatpay-Serial"), fresh)
		}
	}

	// The Go method rotates again: the one that was new is now the old one.
	third, err := b.sim.RotateWechatCertificate()
	if err != nil {
		t.Fatal(err)
	}
	listed := b.sim.WechatCertificates()
	if len(listed) != 2 || listed[0].SerialNo != third.SerialNo || listed[1].SerialNo != fresh || third.SerialNo == fresh ||
		third.SignsFrom == nil || !third.SignsFrom.Equal(b.clock.Now().Add(sim.WechatCertLead)) {
		t.Fatalf("after a second rotation: %+v (%+v)", listed, third)
	}
}

// An immediate rotation (the option, not WeChat's way) signs with the new certificate at
// once, mixed with the old one for the overlap: a merchant meets its serial before it could
// have downloaded it.
func TestWechatCertificates_ImmediateRotationSignsWithTheNewAtOnce(t *testing.T) {
	t.Parallel()
	b := wxCertSetup(t, sim.Config{TimeScale: fastTime, WechatCertOverlap: time.Hour})
	old := b.wk.PlatformSerial
	resp, err := http.Post(b.srv.URL+"/sim/wechat/certificates?immediate=true", "application/json", nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST ?immediate=true: %v %v", resp, err)
	}
	resp.Body.Close()
	d := b.downloadCertificates(t)
	if len(d.serials) != 2 || d.serials[1] != old {
		t.Fatalf("listed %v", d.serials)
	}
	fresh := d.serials[0]
	if l := b.sim.WechatCertificates(); l[0].SignsFrom != nil || l[1].RetiresAt == nil || !l[1].RetiresAt.Equal(b.clock.Now().Add(time.Hour)) {
		t.Fatalf("an immediate rotation: %+v, want the new one signing now and the old one retiring in an hour", l)
	}
	seen := map[string]int{}
	for range 6 {
		a := b.do(t, wxRequest{method: http.MethodGet, uri: "/v3/pay/transactions/out-trade-no/NONE_01?mchid=" + b.wk.MchID})
		if err := verifyCertSigned(d.certs, a.header, a.body, b.wallClock.Now()); err != nil {
			t.Fatal(err)
		}
		seen[a.header.Get("Wechatpay-Serial")]++
	}
	if seen[old] == 0 || seen[fresh] == 0 {
		t.Fatalf("signatures right after an immediate rotation by serial %v, want both", seen)
	}
	if resp, err := http.Post(b.srv.URL+"/sim/wechat/certificates?immediate=maybe", "application/json", nil); err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("POST ?immediate=maybe: %v %v, want 400", resp, err)
	}
	if _, err := b.sim.RotateWechatCertificateImmediately(); err != nil {
		t.Fatal(err)
	}
}

// WechatCertRotateEvery rotates by the simulated clock, with no call to make it happen, on
// WeChat's timing: listed at once, the old one retiring after the lead and the overlap.
func TestWechatCertificates_RotateEveryFollowsTheSimulatedClock(t *testing.T) {
	t.Parallel()
	every := 30 * 24 * time.Hour
	b := wxCertSetup(t, sim.Config{WechatCertRotateEvery: every, WechatCertOverlap: time.Hour})
	if l := b.sim.WechatCertificates(); len(l) != 1 || l[0].SerialNo != b.wk.PlatformSerial {
		t.Fatalf("at start: %+v", l)
	}
	b.clock.Advance(every - time.Hour)
	if l := b.sim.WechatCertificates(); len(l) != 1 {
		t.Fatalf("before the period: %+v", l)
	}
	b.clock.Advance(time.Hour)
	d := b.downloadCertificates(t)
	if len(d.serials) != 2 || d.serials[1] != b.wk.PlatformSerial {
		t.Fatalf("after the period: %v, want a new certificate before %s", d.serials, b.wk.PlatformSerial)
	}
	b.clock.Advance(sim.WechatCertLead)
	if l := b.sim.WechatCertificates(); len(l) != 2 {
		t.Fatalf("after the lead, in the overlap: %+v, want both", l)
	}
	b.clock.Advance(time.Hour)
	if l := b.sim.WechatCertificates(); len(l) != 1 || l[0].SerialNo != d.serials[0] {
		t.Fatalf("after the overlap: %+v, want only %s", l, d.serials[0])
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// The download is a call like any other for faults: a forged answer names a genuine serial
// but does not verify; a system error is unsigned; a rule for Alipay's certificates is
// nonsense.
func TestWechatCertificates_FaultsHitTheDownloadLikeAnyCall(t *testing.T) {
	t.Parallel()
	b := wxCertSetup(t, sim.Config{})
	genuine := b.downloadCertificates(t)
	fault := func(kind string) {
		t.Helper()
		if err := b.sim.SetFaults(sim.FaultPlan{Rules: []sim.FaultRule{{Channel: "wechat", Method: sim.MethodCertificates, Kind: kind, Limit: 1}}}); err != nil {
			t.Fatal(err)
		}
	}
	fault(sim.FaultBadSignature)
	forged := b.do(t, wxRequest{method: http.MethodGet, uri: "/v3/certificates"})
	if forged.status != http.StatusOK || forged.header.Get("Wechatpay-Serial") != b.wk.PlatformSerial ||
		verifyCertSigned(genuine.certs, forged.header, forged.body, b.wallClock.Now()) == nil {
		t.Fatalf("bad_signature download: %s under %q, want a 200 under the genuine serial that does not verify", forged, forged.header.Get("Wechatpay-Serial"))
	}
	fault(sim.FaultSystemError)
	wantWxError(t, "system_error download", b.do(t, wxRequest{method: http.MethodGet, uri: "/v3/certificates"}),
		http.StatusInternalServerError, "SYSTEM_ERROR")
	b.downloadCertificates(t) // the rule is spent

	if err := (sim.FaultPlan{Rules: []sim.FaultRule{{Channel: "alipay", Method: sim.MethodCertificates, Kind: sim.FaultTimeout}}}).Validate(); err == nil {
		t.Fatal("a certificates fault for Alipay validated")
	}
}
