package wechat

import (
	"bytes"
	"cmp"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/wechatpay-apiv3/wechatpay-go/core"
	"github.com/wechatpay-apiv3/wechatpay-go/core/auth/validators"
	"github.com/wechatpay-apiv3/wechatpay-go/core/auth/verifiers"
	"github.com/wechatpay-apiv3/wechatpay-go/services/certificates"
	"github.com/wechatpay-apiv3/wechatpay-go/utils"

	"orderpay"
)

// Defaults of platform certificate mode, applied by New.
const (
	// DefaultCertificateRefreshInterval is how often the platform certificates are
	// downloaded again when nothing else asks for it: the SDK's own default
	// (downloader.DefaultDownloadInterval). WeChat lists a new certificate ten days before
	// the old one expires and signs with it only from five days before (docs/channels.md §E), so a
	// daily download learns it days early; an unknown serial triggers a download anyway.
	DefaultCertificateRefreshInterval = 24 * time.Hour
	// DefaultCertificateDownloadGap is the least time between two downloads. It bounds
	// what notifications under made-up serials can make the adapter ask of WeChat, and is
	// short enough that a caller waiting for the next download still answers a
	// notification within WeChat's 5 seconds (§B4).
	DefaultCertificateDownloadGap = 2 * time.Second
)

// aeadAlgorithm is the only encryption WeChat uses for downloaded certificates (§E).
const aeadAlgorithm = "AEAD_AES_256_GCM"

// maxMissedSerials bounds the memory of serials a download did not list: made-up serials
// must not grow it without end.
const maxMissedSerials = 256

// platformCertificates is one adapter's store of WeChat Pay platform certificates, for
// platform certificate mode. It is the core.CertificateGetter behind the SDK verifier of
// answers and notifications, which asks it for the certificate named by Wechatpay-Serial:
//
//   - a serial it knows is answered from memory, after downloading the list again if the
//     last download is older than the refresh interval (a failed download keeps the
//     certificates known);
//   - a serial it does not know makes it download the list again and look once more, so an
//     answer or notification signed with a certificate issued since the last download
//     (after a rotation) is verified, never refused. Downloads start at least the gap
//     apart, and one download serves every caller waiting for it, so notifications under
//     made-up serials cannot make the adapter hammer WeChat; a serial that a download
//     started for it did not list is refused at once until the gap has passed.
//
// Each adapter has a store of its own: the SDK's process-wide downloader manager keeps one
// downloader per mchid for the whole process, whichever adapter registered it first.
type platformCertificates struct {
	client       *core.Client // signs GET /v3/certificates and checks nothing: fetch does
	apiV3Key     string
	refreshEvery time.Duration
	gap          time.Duration
	timeout      time.Duration
	now          func() time.Time // certificates and gaps are about real time

	mu         sync.Mutex
	certs      map[string]*x509.Certificate // by serial, from the last good download
	downloaded time.Time                    // when the last good download ended
	started    time.Time                    // when the last download started
	downloads  int                          // downloads started, good or not
	lastErr    error                        // why the last download failed; nil if it did not
	missed     map[string]time.Time         // serials a download started for them did not list, and when it started
	running    chan struct{}                // closed when the download under way ends; nil if none
}

var _ core.CertificateGetter = (*platformCertificates)(nil)

// Get returns the platform certificate under serial, downloading the list again first if it
// is unknown or the list is due for its refresh.
func (p *platformCertificates) Get(ctx context.Context, serial string) (*x509.Certificate, bool) {
	p.mu.Lock()
	cert, known := p.certs[serial]
	due := p.now().Sub(p.downloaded) >= p.refreshEvery
	p.mu.Unlock()
	switch {
	case known && !due:
		return cert, true
	case known:
		p.refresh(ctx, "")
	default:
		p.refresh(ctx, serial)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	cert, known = p.certs[serial]
	return cert, known
}

// GetAll returns every platform certificate known, by serial.
func (p *platformCertificates) GetAll(context.Context) map[string]*x509.Certificate {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.certs)
}

// GetNewestSerial returns the serial of the certificate that took effect last, or "" before
// the first download. The SDK sends it in the request's Wechatpay-Serial header.
func (p *platformCertificates) GetNewestSerial(context.Context) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if serials := p.serials(); len(serials) > 0 {
		return serials[0]
	}
	return ""
}

// serials returns the serials known, the certificate that took effect last first. The
// caller holds p.mu.
func (p *platformCertificates) serials() []string {
	serials := slices.Collect(maps.Keys(p.certs))
	slices.SortFunc(serials, func(a, b string) int {
		return cmp.Or(p.certs[b].NotBefore.Compare(p.certs[a].NotBefore), cmp.Compare(a, b))
	})
	return serials
}

// refresh downloads the list again unless that has become needless meanwhile. want is the
// serial a caller misses, or "" for the periodic refresh, which never waits for the gap
// (the certificates known still serve). A caller waits for at most one download that
// started after it asked: if that one does not list its serial, nothing will soon.
func (p *platformCertificates) refresh(ctx context.Context, want string) {
	asked := p.now()
	for {
		p.mu.Lock()
		now := p.now()
		missedAt, missed := p.missed[want]
		switch {
		case want == "" && now.Sub(p.downloaded) < p.refreshEvery:
			p.mu.Unlock()
			return // another caller refreshed
		case want != "" && p.certs[want] != nil:
			p.mu.Unlock()
			return // a download brought it
		case want != "" && p.running == nil && p.downloads > 0 && !p.started.Before(asked):
			p.remember(want, p.started)
			p.mu.Unlock()
			return // a download started since it was asked for, and did not bring it
		case missed && now.Sub(missedAt) < p.gap:
			p.mu.Unlock()
			return // a download just missed it: refused at once, not downloaded again
		}
		if running := p.running; running != nil {
			p.mu.Unlock()
			select {
			case <-running:
				continue
			case <-ctx.Done():
				return
			}
		}
		if wait := p.started.Add(p.gap).Sub(now); wait > 0 {
			p.mu.Unlock()
			if want == "" {
				return
			}
			t := time.NewTimer(wait)
			select {
			case <-t.C:
				continue
			case <-ctx.Done():
				t.Stop()
				return
			}
		}
		done := make(chan struct{})
		p.running, p.started = done, now
		p.downloads++
		p.mu.Unlock()

		certs, err := p.fetch(ctx)

		p.mu.Lock()
		p.lastErr = err
		if err == nil {
			p.certs, p.downloaded = certs, p.now()
		}
		if want != "" && p.certs[want] == nil {
			p.remember(want, now)
		}
		p.running = nil
		close(done)
		p.mu.Unlock()
		return
	}
}

// remember that the download started at started did not list serial: for the gap after
// it, serial is refused without another download. The caller holds p.mu.
func (p *platformCertificates) remember(serial string, started time.Time) {
	if len(p.missed) >= maxMissedSerials {
		clear(p.missed)
	}
	p.missed[serial] = started
}

// fetch downloads GET /v3/certificates and returns the certificates it lists, by serial,
// once every one of them decrypted with our APIv3 key (so WeChat sent it: only WeChat and
// we know the key), parsed, carries the serial it is listed under and has not expired, and
// the answer itself is signed by one of them or by a certificate already known (§E). Any
// flaw refuses the whole list: a certificate is never taken from an answer that is not
// WeChat's.
func (p *platformCertificates) fetch(ctx context.Context) (map[string]*x509.Certificate, error) {
	// Every caller waiting shares this download: it has a deadline of its own rather than
	// the first caller's, which may give up sooner. It may run inside another call's
	// verification: its answer is kept out of that call's recorded raw answer.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.timeout)
	defer cancel()
	ctx = context.WithValue(ctx, exchangeKey{}, (*exchange)(nil))
	result, err := p.client.Get(ctx, DefaultBaseURL+"/v3/certificates")
	if err != nil {
		apiErr, detail := describe(err, result)
		if apiErr != nil && apiErr.StatusCode == http.StatusNotFound {
			detail += ` (WeChat issues no platform certificates to a merchant in public key mode: use mode "pubkey")`
		}
		return nil, fmt.Errorf("download platform certificates: %s", detail)
	}
	body, err := io.ReadAll(result.Response.Body)
	if err != nil {
		return nil, fmt.Errorf("download platform certificates: %w", err)
	}
	var list certificates.DownloadCertificatesResponse
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, errors.New("download platform certificates: the answer is not a certificate list")
	}
	now := p.now()
	got := map[string]*x509.Certificate{}
	for _, entry := range list.Data {
		serial := deref(entry.SerialNo)
		cert, err := p.openCertificate(entry)
		if err != nil {
			return nil, fmt.Errorf("download platform certificates: certificate %s: %w", serial, err)
		}
		if now.After(cert.NotAfter) {
			continue // expired: WeChat signs nothing with it any more
		}
		got[serial] = cert
	}
	if len(got) == 0 {
		return nil, errors.New("download platform certificates: no valid certificate listed")
	}

	trusted := map[string]*x509.Certificate{}
	p.mu.Lock()
	maps.Copy(trusted, p.certs)
	p.mu.Unlock()
	maps.Copy(trusted, got)
	result.Response.Body = io.NopCloser(bytes.NewReader(body))
	check := validators.NewWechatPayResponseValidator(verifiers.NewSHA256WithRSAVerifier(core.NewCertificateMap(trusted)))
	if err := check.Validate(ctx, result.Response); err != nil {
		return nil, fmt.Errorf("download platform certificates: the list is not signed by a platform certificate: %w", err)
	}
	return got, nil
}

// openCertificate decrypts and parses one listed certificate, and checks that it is the
// certificate of the serial it is listed under.
func (p *platformCertificates) openCertificate(entry certificates.Certificate) (*x509.Certificate, error) {
	enc := entry.EncryptCertificate
	switch {
	case entry.SerialNo == nil || enc == nil || enc.Ciphertext == nil || enc.Nonce == nil:
		return nil, errors.New("incomplete entry")
	case deref(enc.Algorithm) != aeadAlgorithm:
		return nil, fmt.Errorf("unknown algorithm %q", deref(enc.Algorithm))
	}
	pemText, err := utils.DecryptAES256GCM(p.apiV3Key, deref(enc.AssociatedData), *enc.Nonce, *enc.Ciphertext)
	if err != nil {
		// Not encrypted for us: someone else's list, or a forgery.
		return nil, errors.New("does not decrypt with our APIv3 key")
	}
	cert, err := utils.LoadCertificate(pemText)
	if err != nil {
		return nil, errors.New("not an X.509 certificate")
	}
	if utils.GetCertificateSerialNumber(*cert) != *entry.SerialNo {
		return nil, errors.New("the certificate's own serial is another")
	}
	return cert, nil
}

// describe is the store's state, for an operator's description (Channel.Describe).
func (p *platformCertificates) describe() *orderpay.PlatformCertificates {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := &orderpay.PlatformCertificates{
		Certificates:           []orderpay.PlatformCertificate{},
		RefreshIntervalSeconds: int64(p.refreshEvery / time.Second),
		Downloads:              p.downloads,
	}
	for _, s := range p.serials() {
		d.Certificates = append(d.Certificates, orderpay.PlatformCertificate{Serial: s,
			PublicKeySHA256: publicKeyFingerprint(p.certs[s].PublicKey), ExpireTime: p.certs[s].NotAfter.In(cst)})
	}
	if !p.downloaded.IsZero() {
		at := p.downloaded.In(cst)
		d.DownloadedAt = &at
	}
	if p.lastErr != nil {
		d.DownloadError = p.lastErr.Error()
	}
	return d
}
