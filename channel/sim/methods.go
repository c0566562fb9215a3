package sim

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"

	"orderpay"
)

// PayAs is a buyer's wallet acting on a pay instruction (POST /sim/pay with "pay"): the
// instruction exactly as the shop handed it to the device, and the device as the wallet
// sees it. The wallet checks both the way the real one does before anything is paid.
type PayAs struct {
	Pay *orderpay.PayInstruction `json:"pay"`
	// UserAgent, Referer and ClientIP are the device's: the browser or app the page runs
	// in, the page that opened the cashier (WeChat H5 and JSAPI check it), and the address
	// the buyer's device comes from (WeChat H5 checks it is the one the prepay named).
	UserAgent string `json:"user_agent"`
	Referer   string `json:"referer"`
	ClientIP  string `json:"client_ip"`
	// Buyer names the simulated buyer who pays: an instruction made for one wallet user
	// (WeChat JSAPI and mini program, Alipay in-app) is paid only by that one.
	Buyer string `json:"buyer"`
	// Action is WalletPay (the default) or WalletDecline: the buyer opens the cashier and
	// leaves without paying (an Alipay WAP cashier then follows quit_url).
	Action string `json:"action"`
}

// PayInstruction plays the buyer's wallet paying (or declining) a pay instruction of any
// method. A qr instruction is its code, paid as a scanned one (Wallet). The others go to
// their channel's own wallet, which checks the instruction (signatures, app ids, amount,
// lifetime, the page it was opened from, the payer) and refuses what the real one refuses,
// with an error in the channel's own words: EINVALID, or ECONFLICT for a trade that cannot
// be paid any more.
func (s *Simulator) PayInstruction(ctx context.Context, a PayAs) (*PayResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if a.Pay == nil {
		return nil, orderpay.Errorf(orderpay.EINVALID, "pay is required: the instruction as the shop handed it to the device")
	}
	if a.Action == "" {
		a.Action = WalletPay
	}
	if a.Action != WalletPay && a.Action != WalletDecline {
		return nil, orderpay.Errorf(orderpay.EINVALID, "action must be %s or %s", WalletPay, WalletDecline)
	}
	if err := a.Pay.Check(); err != nil {
		return nil, err
	}
	if a.Pay.Method == orderpay.MethodQR {
		return s.Wallet(ctx, a.Pay.Field("code"), a.Action)
	}
	switch a.Pay.Channel {
	case orderpay.ChannelAlipay:
		return s.alipayPayInstruction(ctx, a)
	case orderpay.ChannelWechat:
		return s.wechatPayInstruction(ctx, a)
	}
	return nil, orderpay.Errorf(orderpay.EINVALID, "no channel %q", a.Pay.Channel)
}

// Identity is a simulated buyer's identity at the wallets: one openid per WeChat appid,
// and one Alipay user id whatever app asks (GET /sim/wallet/identity).
type Identity struct {
	OpenID       string `json:"openid,omitempty"`
	AlipayUserID string `json:"alipay_user_id"`
}

// IdentityOf is buyer's identity, the openid for the WeChat appid (none without one). It
// is fixed by the simulator's keys: the same buyer and appid always give the same openid,
// and different appids different ones, as WeChat's do; what the OAuth flows return.
func (s *Simulator) IdentityOf(buyer, appid string) Identity {
	// Met: its openids are known from now on, so that a prepay naming one for another
	// appid is refused as WeChat refuses it.
	s.mu.Lock()
	s.meetWechatBuyer(buyer)
	s.mu.Unlock()
	id := Identity{AlipayUserID: s.alipayUserID(buyer)}
	if appid != "" {
		id.OpenID = s.openID(buyer, appid)
	}
	return id
}

// openID is buyer's openid for appid: 28 characters, as WeChat's are.
func (s *Simulator) openID(buyer, appid string) string {
	sum := s.identityMAC("openid", appid, buyer)
	return "o" + base64.RawURLEncoding.EncodeToString(sum[:20])[:27]
}

// alipayUserID is buyer's Alipay user id: 2088 and 12 digits, as Alipay's are.
func (s *Simulator) alipayUserID(buyer string) string {
	sum := s.identityMAC("alipay", "", buyer)
	return fmt.Sprintf("2088%012d", binary.BigEndian.Uint64(sum[:8])%1_000_000_000_000)
}

// identityMAC keys an identity on the simulator's merchant keys, so that two simulators
// give a buyer different ids, and one simulator the same ids across restarts.
func (s *Simulator) identityMAC(kind, appid, buyer string) [sha256.Size]byte {
	m := hmac.New(sha256.New, []byte(s.keys.AppID+"/"+s.keys.SellerID))
	fmt.Fprintf(m, "%s\x00%s\x00%s", kind, appid, buyer)
	var out [sha256.Size]byte
	copy(out[:], m.Sum(nil))
	return out
}
