package sim

import (
	"cmp"
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

// registerWalletPage adds the wallet page (GET /sim/wallet, embedded in package web) and
// the list of codes it offers (GET /sim/pending). The page pays and declines a scanned code,
// or an instruction of any way to pay pasted with the device it was handed to (the pay
// object, the User-Agent, the Referer, the buyer and their address), through POST /sim/pay,
// and sets faults through /sim/faults, like any other client.
func (s *Simulator) registerWalletPage(mux *http.ServeMux) {
	page := web.Wallet()
	mux.Handle("GET /sim/wallet", page)
	mux.Handle("GET /sim/assets/{file}", page)
	mux.HandleFunc("GET /sim/pending", func(w http.ResponseWriter, _ *http.Request) {
		codes := s.PendingCodes()
		if codes == nil {
			codes = []PendingCode{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"pending": codes})
	})
}
