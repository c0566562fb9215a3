package sim

import (
	"bytes"
	"cmp"
	_ "embed"
	"maps"
	"net/http"
	"slices"
	"time"

	"orderpay"
	"orderpay/web"
)

// PendingCode is a QR code a buyer could still pay: issued, unexpired, and its trade
// neither paid nor closed. The wallet page lists them, as a phone would see them on screens.
type PendingCode struct {
	Channel    string    `json:"channel"`
	OutTradeNo string    `json:"out_trade_no"`
	QRCode     string    `json:"qr_code"`
	Amount     int64     `json:"amount"` // fen
	Subject    string    `json:"subject"`
	ExpiresAt  time.Time `json:"expires_at"`
}

// PendingCodes lists the QR codes that can still be paid, newest first (a trade of another
// method has no code to scan: its instruction is paid through POST /sim/pay with pay).
func (s *Simulator) PendingCodes() []PendingCode {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []PendingCode
	for _, t := range s.alipay.byOutTradeNo {
		t.refresh(now)
		if t.qrCode == "" || t.cancelled || t.paid() || (t.scanned() && t.status != AlipayWaitBuyerPay) || (!t.scanned() && !t.codeUsable(now)) {
			continue
		}
		out = append(out, PendingCode{Channel: orderpay.ChannelAlipay, OutTradeNo: t.outTradeNo, QRCode: t.qrCode, Amount: t.amount,
			Subject: t.subject, ExpiresAt: earliest(t.qrExpiresAt, t.payDeadline)})
	}
	for _, o := range s.wechat.byOutTradeNo {
		if o.codeURL == "" || o.paid() || o.closed() || !now.Before(o.timeExpire) {
			continue
		}
		out = append(out, PendingCode{Channel: orderpay.ChannelWechat, OutTradeNo: o.outTradeNo, QRCode: o.codeURL, Amount: o.prepay.total,
			Subject: o.prepay.description, ExpiresAt: o.timeExpire})
	}
	slices.SortFunc(out, func(a, b PendingCode) int {
		return cmp.Or(b.ExpiresAt.Compare(a.ExpiresAt), cmp.Compare(b.OutTradeNo, a.OutTradeNo))
	})
	return out
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// walletBarcodeJS is the wallet page's payment-code section (barcode.go), added to the
// page by the simulator, which owns the endpoints it speaks to.
//
//go:embed wallet_barcode.js
var walletBarcodeJS []byte

// walletBarcodeScript is the tag that adds it, after the page's own scripts.
const walletBarcodeScript = `<script src="/sim/assets/wallet_barcode.js" defer></script>`

// registerWalletPage adds the wallet page (GET /sim/wallet, embedded in package web) and
// the list of codes it offers (GET /sim/pending). The page pays and declines a scanned code,
// or an instruction of any way to pay pasted with the device it was handed to (the pay
// object, the User-Agent, the Referer, the buyer and their address), through POST /sim/pay,
// and sets faults through /sim/faults, like any other client. Its payment-code section
// (wallet_barcode.js: show a code as a barcode, confirm a payment waiting for the buyer) is
// the simulator's own script, added to the page's head.
func (s *Simulator) registerWalletPage(mux *http.ServeMux) {
	page := web.Wallet()
	mux.HandleFunc("GET /sim/wallet", func(w http.ResponseWriter, r *http.Request) {
		rec := &pageRecorder{header: http.Header{}, status: http.StatusOK}
		page.ServeHTTP(rec, r)
		body := rec.body.Bytes()
		if rec.status == http.StatusOK {
			body = bytes.Replace(body, []byte("</head>"), []byte(walletBarcodeScript+"\n</head>"), 1)
		}
		maps.Copy(w.Header(), rec.header)
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.status)
		_, _ = w.Write(body)
	})
	mux.HandleFunc("GET /sim/assets/wallet_barcode.js", func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/javascript; charset=utf-8")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-cache")
		_, _ = w.Write(walletBarcodeJS)
	})
	mux.Handle("GET /sim/assets/{file}", page)
	mux.HandleFunc("GET /sim/pending", func(w http.ResponseWriter, _ *http.Request) {
		codes := s.PendingCodes()
		if codes == nil {
			codes = []PendingCode{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"pending": codes})
	})
}

// pageRecorder keeps what a page handler writes, so that the wallet page can be added to
// before it is sent.
type pageRecorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (p *pageRecorder) Header() http.Header         { return p.header }
func (p *pageRecorder) WriteHeader(status int)      { p.status = status }
func (p *pageRecorder) Write(b []byte) (int, error) { return p.body.Write(b) }
