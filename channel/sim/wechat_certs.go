package sim

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"net/http"
	"sync"
	"time"

	"orderpay"
)

// WechatMode is how the simulated WeChat Pay signs answers and notifications for its
// merchant. A merchant is in exactly one mode (docs/channels.md §E).
type WechatMode string

const (
	// WechatModePublicKey signs with the WeChat Pay public key pair and names PublicKeyID
	// in Wechatpay-Serial. GET /v3/certificates has nothing for such a merchant. The default:
	// since late 2024 it is the only mode new merchants get.
	WechatModePublicKey WechatMode = "pubkey"
	// WechatModeCertificate signs with a platform certificate's key and names its serial.
	// The merchant downloads the certificates from GET /v3/certificates, and they rotate.
	WechatModeCertificate WechatMode = "certificate"
)

// MethodCertificates names WeChat's GET /v3/certificates in fault rules (WeChat only).
const MethodCertificates = "certificates"

// DefaultWechatCertOverlap is how long the old and the new platform certificate both sign
// (Config.WechatCertOverlap): WeChat signs with both mixed from five days before the old
// one's expiry (docs/channels.md §E).
const DefaultWechatCertOverlap = 5 * 24 * time.Hour

// WechatCertLead is how long after a rotation the new certificate is listed before it
// signs anything: WeChat lists the successor ten days before the old one expires and signs
// with it only from five days before (docs/channels.md §E), so a merchant that downloads the
// list in those five days knows the new certificate before the first answer it signs. A
// rotation made with RotateWechatCertificateImmediately (or POST /sim/wechat/certificates
// ?immediate=true) skips it: the new certificate signs at once, the old behaviour, which
// catches a merchant that only learns a certificate when it first sees its serial.
const WechatCertLead = 5 * 24 * time.Hour

// Answers of GET /v3/certificates (docs/channels.md §E).
const (
	// wechatCertificateAD is the associated data of an encrypted certificate, as WeChat
	// sends it.
	wechatCertificateAD = "certificate"
	// wechatNoCertificates is what a public key mode merchant gets: WeChat issues it no
	// platform certificates. Seen in the wild as 404 RESOURCE_NOT_EXISTS with this message
	// (wechatpay-java#400, WxJava#3412); others report "证书不存在", 500 "系统繁忙" or 403.
	wechatNoCertificates = "无可用的平台证书，请在商户平台-API安全申请使用微信支付公钥"
)

// WechatCertificate is one platform certificate WeChat Pay lists for the merchant.
type WechatCertificate struct {
	SerialNo      string    `json:"serial_no"`
	EffectiveTime time.Time `json:"effective_time"`
	ExpireTime    time.Time `json:"expire_time"`
	// SignsFrom is set on the new certificate while it is listed but does not sign yet:
	// from then on (simulated time) it signs, mixed with the old one.
	SignsFrom *time.Time `json:"signs_from,omitempty"`
	// RetiresAt is set on the old certificate while a new one is listed: from then on
	// (simulated time) it no longer signs and is no longer listed, as if it had expired.
	RetiresAt   *time.Time        `json:"retires_at,omitempty"`
	Certificate *x509.Certificate `json:"-"`
}

// wechatPlatform holds the platform certificates of a merchant in certificate mode and
// rotates them. It has its own lock: answers are signed outside Simulator.mu.
type wechatPlatform struct {
	ca      *x509.Certificate
	caKey   *rsa.PrivateKey
	clock   orderpay.Clock // simulated time: overlaps and periodic rotations
	wall    orderpay.Clock // WeChat's wall clock: the validity of new certificates
	overlap time.Duration
	every   time.Duration

	mu        sync.Mutex
	certs     []*platformCert // at most two: the previous one (until it retires) and the newest
	rotatedAt time.Time       // when the newest one appeared (or the simulator started)
	signsFrom time.Time       // when the newest one starts signing, mixed with the previous one
	retiresAt time.Time       // when the previous one stops signing and is no longer listed
	turn      uint64          // alternates the signer during an overlap
}

type platformCert struct {
	cert   *x509.Certificate
	key    *rsa.PrivateKey
	serial string
}

func newWechatPlatform(keys *WechatKeys, cfg Config) *wechatPlatform {
	return &wechatPlatform{
		ca:        keys.PlatformCACertificate,
		caKey:     keys.PlatformCAKey,
		clock:     cfg.Clock,
		wall:      cfg.WechatWallClock,
		overlap:   cfg.WechatCertOverlap,
		every:     cfg.WechatCertRotateEvery,
		certs:     []*platformCert{{cert: keys.PlatformCertificate, key: keys.PlatformCertificateKey, serial: keys.PlatformSerial}},
		rotatedAt: cfg.Clock.Now(),
	}
}

// inUse returns the certificates WeChat lists at now, newest first: the newest alone, or
// until the previous one retires the newest and the one before it. The caller holds p.mu.
func (p *wechatPlatform) inUse(now time.Time) []*platformCert {
	newest := p.certs[len(p.certs)-1]
	if len(p.certs) > 1 && now.Before(p.retiresAt) {
		return []*platformCert{newest, p.certs[len(p.certs)-2]}
	}
	return []*platformCert{newest}
}

// signer returns the key and serial the next answer or notification is signed with: the
// previous certificate alone while the newest is only listed (WechatCertLead), the two taking
// turns during the overlap ("mixed", docs/channels.md §E, so both are seen within any two
// consecutive signatures), then the newest alone.
func (p *wechatPlatform) signer() (*rsa.PrivateKey, string) {
	p.rotateIfDue()
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	certs := p.inUse(now)
	if len(certs) > 1 && now.Before(p.signsFrom) {
		certs = certs[1:]
	}
	p.turn++
	c := certs[int(p.turn%uint64(len(certs)))]
	return c.key, c.serial
}

// listed returns what GET /v3/certificates lists now, newest first.
func (p *wechatPlatform) listed() []WechatCertificate {
	p.rotateIfDue()
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	in := p.inUse(now)
	out := make([]WechatCertificate, len(in))
	for i, c := range in {
		out[i] = WechatCertificate{SerialNo: c.serial, EffectiveTime: c.cert.NotBefore, ExpireTime: c.cert.NotAfter, Certificate: c.cert}
		switch {
		case i > 0:
			retires := p.retiresAt
			out[i].RetiresAt = &retires
		case len(in) > 1 && now.Before(p.signsFrom):
			signs := p.signsFrom
			out[i].SignsFrom = &signs
		}
	}
	return out
}

// rotateIfDue rotates when Config.WechatCertRotateEvery has passed since the last rotation.
// A clock moved by several periods at once rotates once.
func (p *wechatPlatform) rotateIfDue() {
	if p.every <= 0 {
		return
	}
	p.mu.Lock()
	due := !p.clock.Now().Before(p.rotatedAt.Add(p.every))
	p.mu.Unlock()
	if due {
		_, _ = p.rotate(WechatCertLead, func(last time.Time) bool { return p.clock.Now().Before(last.Add(p.every)) })
	}
}

// rotate issues a new platform certificate under the CA and makes it the newest: listed at
// once, signing after lead, mixed with the previous one for the overlap, then alone. skip,
// checked under the lock once the key is made, cancels a rotation another caller already
// did.
func (p *wechatPlatform) rotate(lead time.Duration, skip func(lastRotation time.Time) bool) (WechatCertificate, error) {
	// RSA key generation takes a while: never under the lock that every signature takes.
	key, err := rsa.GenerateKey(rand.Reader, keyBits)
	if err != nil {
		return WechatCertificate{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	newest := p.certs[len(p.certs)-1]
	if skip != nil && skip(p.rotatedAt) {
		return WechatCertificate{SerialNo: newest.serial, Certificate: newest.cert}, nil
	}
	// An hour of slack for verifiers whose clock is behind, but always after the previous
	// certificate's start: SDKs take the latest NotBefore as the newest certificate.
	notBefore := p.wall.Now().Add(-time.Hour).Truncate(time.Second)
	if !notBefore.After(newest.cert.NotBefore) {
		notBefore = newest.cert.NotBefore.Add(time.Second)
	}
	cert, err := IssuePlatformCertificate(p.ca, p.caKey, &key.PublicKey, notBefore)
	if err != nil {
		return WechatCertificate{}, err
	}
	// Only the previous certificate overlaps with the new one; an older one retires now, as
	// a certificate rotated twice within an overlap would have expired.
	p.certs = []*platformCert{newest, {cert: cert, key: key, serial: certificateSerial(cert)}}
	p.rotatedAt = p.clock.Now()
	p.signsFrom = p.rotatedAt.Add(lead)
	p.retiresAt = p.signsFrom.Add(p.overlap)
	c := WechatCertificate{SerialNo: certificateSerial(cert), EffectiveTime: cert.NotBefore, ExpireTime: cert.NotAfter, Certificate: cert}
	if lead > 0 {
		signs := p.signsFrom
		c.SignsFrom = &signs
	}
	return c, nil
}

// wechatSigner returns the key and the Wechatpay-Serial of the next answer or notification:
// the public key and its id in public key mode, a platform certificate in certificate mode.
func (s *Simulator) wechatSigner() (*rsa.PrivateKey, string) {
	if s.wxPlatform == nil {
		return s.keys.Wechat.PlatformPrivateKey, s.keys.Wechat.PublicKeyID
	}
	return s.wxPlatform.signer()
}

// RotateWechatCertificate makes a new platform certificate appear, as WeChat Pay does ten
// days before the current one expires (docs/channels.md §E): it is listed by GET
// /v3/certificates at once; answers and notifications are still signed by the previous one
// alone for WechatCertLead (5 days), then by both mixed for Config.WechatCertOverlap (5 days),
// then by the new one alone, when the previous one is no longer listed either. It returns the
// new certificate. In public key mode there is nothing to rotate: ECONFLICT.
func (s *Simulator) RotateWechatCertificate() (WechatCertificate, error) {
	return s.rotateWechatCertificate(WechatCertLead)
}

// RotateWechatCertificateImmediately rotates as RotateWechatCertificate does, but the new
// certificate signs at once, mixed with the previous one for Config.WechatCertOverlap: no
// time to download it before its first signature. Real WeChat does not do this; it tests a
// merchant that learns a certificate only when an answer names it.
func (s *Simulator) RotateWechatCertificateImmediately() (WechatCertificate, error) {
	return s.rotateWechatCertificate(0)
}

func (s *Simulator) rotateWechatCertificate(lead time.Duration) (WechatCertificate, error) {
	if s.wxPlatform == nil {
		return WechatCertificate{}, orderpay.Errorf(orderpay.ECONFLICT, "the WeChat merchant is in public key mode: it has no platform certificates to rotate")
	}
	c, err := s.wxPlatform.rotate(lead, nil)
	if err != nil {
		return WechatCertificate{}, err
	}
	s.log.Info("sim: wechat platform certificate rotated", "serial_no", c.SerialNo, "signs_after", lead)
	return c, nil
}

// WechatCertificates returns the platform certificates GET /v3/certificates lists now,
// newest first; none in public key mode.
func (s *Simulator) WechatCertificates() []WechatCertificate {
	if s.wxPlatform == nil {
		return nil
	}
	return s.wxPlatform.listed()
}

var wechatCertificatesEndpoint = wechatEndpoint{
	method:   MethodCertificates,
	key:      func(s *Simulator, _ *http.Request, _ []byte) string { return s.keys.Wechat.MchID },
	run:      (*Simulator).wechatCertificates,
	readOnly: true,
}

// wechatCertificateJSON is one entry of GET /v3/certificates: the certificate's PEM,
// encrypted with the APIv3 key like a notification's resource.
type wechatCertificateJSON struct {
	SerialNo           string               `json:"serial_no"`
	EffectiveTime      string               `json:"effective_time"`
	ExpireTime         string               `json:"expire_time"`
	EncryptCertificate wechatEncryptedValue `json:"encrypt_certificate"`
}

// wechatCertificates serves GET /v3/certificates: the platform certificates in use, each
// encrypted with AEAD_AES_256_GCM under the APIv3 key with associated data "certificate",
// in an answer signed like any other (so during an overlap possibly by the new certificate
// only the download itself reveals). A public key mode merchant has none: 404
// RESOURCE_NOT_EXISTS.
func (s *Simulator) wechatCertificates(*http.Request, []byte) wechatAnswer {
	if s.wxPlatform == nil {
		return wechatError(http.StatusNotFound, "RESOURCE_NOT_EXISTS", wechatNoCertificates)
	}
	var out struct {
		Data []wechatCertificateJSON `json:"data"`
	}
	for _, c := range s.wxPlatform.listed() {
		pem, err := CertificatePEM(c.Certificate)
		if err != nil {
			return wechatError(http.StatusInternalServerError, "SYSTEM_ERROR", "系统错误")
		}
		sealed, err := sealWechatAEAD(s.keys.Wechat.APIv3Key, []byte(pem), wechatCertificateAD)
		if err != nil {
			return wechatError(http.StatusInternalServerError, "SYSTEM_ERROR", "系统错误")
		}
		out.Data = append(out.Data, wechatCertificateJSON{
			SerialNo:           c.SerialNo,
			EffectiveTime:      wechatTime(c.EffectiveTime),
			ExpireTime:         wechatTime(c.ExpireTime),
			EncryptCertificate: sealed,
		})
	}
	return wechatJSON(http.StatusOK, out)
}

// wechatCertificatesStatus is the body of GET and POST /sim/wechat/certificates.
type wechatCertificatesStatus struct {
	Mode         WechatMode          `json:"mode"`
	PublicKeyID  string              `json:"public_key_id,omitempty"`
	Overlap      Duration            `json:"overlap,omitempty"`
	RotateEvery  Duration            `json:"rotate_every,omitempty"`
	Certificates []WechatCertificate `json:"certificates"`
}

// serveWechatCertificates is GET /sim/wechat/certificates (the mode and the platform
// certificates listed now) and POST /sim/wechat/certificates (rotate now, as WeChat does, or
// with ?immediate=true signing with the new one at once; then the same). A rotation in
// public key mode is 409.
func (s *Simulator) serveWechatCertificates(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
	case http.MethodPost:
		lead := WechatCertLead
		switch r.URL.Query().Get("immediate") {
		case "", "false":
		case "true":
			lead = 0
		default:
			writeError(w, orderpay.Errorf(orderpay.EINVALID, "immediate must be true or false"))
			return
		}
		if _, err := s.rotateWechatCertificate(lead); err != nil {
			writeError(w, err)
			return
		}
	default:
		w.Header().Set("Allow", "GET, POST")
		writeError(w, orderpay.Errorf(orderpay.EINVALID, "use GET to read the platform certificates, POST to rotate them"))
		return
	}
	st := wechatCertificatesStatus{Mode: s.cfg.WechatMode, Certificates: s.WechatCertificates()}
	if st.Certificates == nil {
		st.Certificates = []WechatCertificate{}
	}
	if s.wxPlatform == nil {
		st.PublicKeyID = s.keys.Wechat.PublicKeyID
	} else {
		st.Overlap, st.RotateEvery = Duration(s.cfg.WechatCertOverlap), Duration(s.cfg.WechatCertRotateEvery)
	}
	writeJSON(w, http.StatusOK, st)
}
