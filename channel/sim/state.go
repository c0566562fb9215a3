package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"orderpay"
)

// The simulator keeps what a real channel never forgets in its state directory
// (Config.StateDir), so that a restart goes on where it stopped: every trade of both
// channels with its refunds, the prepay_ids of WeChat orders, the buyers' payment codes, the
// merchant accounts that are short, and the notifications still due with how far their
// schedule got. The bills are made from the trades and refunds. Keys are not state: they
// are in their own files, and the journal never copies them.
//
// The state is a journal (journal.go): each change writes the new state of the objects it
// touched, while the simulator's mutex is still held, so the file and memory never
// disagree on the order of changes; New replays it and writes it afresh, compacted.

// Journal kinds.
const (
	kindAlipayTrade = "alipay_trade"    // by out_trade_no
	kindWechatOrder = "wechat_order"    // by out_trade_no
	kindPrepayID    = "wechat_prepayid" // by prepay_id
	kindPayCode     = "pay_code"        // by code
	kindShortage    = "shortage"        // by channel
	kindNotify      = "notify"          // by notify id
)

// stateMutex is the simulator's mutex: unlocking it first writes what changed under it to
// the journal, if the simulator keeps one.
type stateMutex struct {
	sync.Mutex
	s *Simulator
}

func (m *stateMutex) Unlock() {
	if m.s != nil && m.s.journal != nil {
		m.s.flushState()
	}
	m.Mutex.Unlock()
}

// dirtySet is what the critical section in progress may have changed: every trade, order
// and code it looked up. flushState writes those whose state differs from what was last
// written, so a look that changed nothing writes nothing.
type dirtySet struct {
	alipay map[*alipayTrade]struct{}
	wechat map[*wechatOrder]struct{}
	prepay []*wechatPrepayID
	codes  map[*payCode]struct{}
	// notes are the notifications the critical section made, written due with the
	// change that made them (the notifier, which queues them after, writes them again).
	notes   []dueNote
	written map[journalKey]uint64 // hash of the value last written, per object
}

type dueNote struct {
	id string
	st notifyState
}

// noteDue marks n, just made under s.mu, as due, so that the journal has it with the
// change that made it. Without a journal, or while New restores, it does nothing.
func (s *Simulator) noteDue(n *outgoingNotification) {
	if s.dirty != nil && n != nil {
		s.dirty.notes = append(s.dirty.notes, dueNote{n.NotifyID, notifyStateOf(n, n.Resume, cmpOrNow(n.NotBefore, s.clock))})
	}
}

func newDirtySet() *dirtySet {
	return &dirtySet{alipay: map[*alipayTrade]struct{}{}, wechat: map[*wechatOrder]struct{}{},
		codes: map[*payCode]struct{}{}, written: map[journalKey]uint64{}}
}

// touch marks t as possibly changed. The caller holds s.mu. Without a journal it does nothing.
func (b *alipayBook) touch(t *alipayTrade) *alipayTrade {
	if b.dirty != nil && t != nil {
		b.dirty.alipay[t] = struct{}{}
	}
	return t
}

// touch marks o as possibly changed. The caller holds s.mu.
func (b *wechatBook) touch(o *wechatOrder) *wechatOrder {
	if b.dirty != nil && o != nil {
		b.dirty.wechat[o] = struct{}{}
	}
	return o
}

// touchPrepayID marks a new prepay_id to write. The caller holds s.mu.
func (b *wechatBook) touchPrepayID(p *wechatPrepayID) {
	if b.dirty != nil {
		b.dirty.prepay = append(b.dirty.prepay, p)
	}
}

// touch marks c as possibly changed. The caller holds s.mu.
func (b *codeBook) touch(c *payCode) *payCode {
	if b.dirty != nil && c != nil {
		b.dirty.codes[c] = struct{}{}
	}
	return c
}

// flushState writes the objects the critical section touched whose state changed, and
// the shortages if they did. The caller holds s.mu.
func (s *Simulator) flushState() {
	d := s.dirty
	for t := range d.alipay {
		s.putState(kindAlipayTrade, t.outTradeNo, alipayTradeStateOf(t))
	}
	clear(d.alipay)
	for o := range d.wechat {
		s.putState(kindWechatOrder, o.outTradeNo, wechatOrderStateOf(o))
	}
	clear(d.wechat)
	for _, p := range d.prepay {
		s.putState(kindPrepayID, p.id, prepayIDStateOf(p))
	}
	clear(d.prepay)
	d.prepay = d.prepay[:0]
	for c := range d.codes {
		s.putState(kindPayCode, c.code, payCodeStateOf(c))
	}
	clear(d.codes)
	for _, n := range d.notes {
		s.journal.put(kindNotify, n.id, n.st)
	}
	clear(d.notes)
	d.notes = d.notes[:0]
	for _, ch := range []string{orderpay.ChannelAlipay, orderpay.ChannelWechat} {
		if sh, ok := s.shortages[ch]; ok {
			s.putState(kindShortage, ch, shortageState{Since: sh.since, CureAfter: sh.cureAfter})
		} else if _, was := d.written[journalKey{kindShortage, ch}]; was {
			delete(d.written, journalKey{kindShortage, ch})
			s.journal.put(kindShortage, ch, nil)
		}
	}
}

// putState writes v as the state of kind/id unless it is what was last written.
func (s *Simulator) putState(kind, id string, v any) {
	b, sum, err := encodeState(v)
	if err != nil {
		s.journal.fail(err)
		return
	}
	k := journalKey{kind, id}
	if prev, ok := s.dirty.written[k]; ok && prev == sum {
		return
	}
	s.dirty.written[k] = sum
	s.journal.put(kind, id, b)
}

// encodeState is v as the journal stores it, and the hash by which an unchanged state is
// not written again.
func encodeState(v any) (json.RawMessage, uint64, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, 0, err
	}
	h := fnv.New64a()
	h.Write(b)
	return b, h.Sum64(), nil
}

// The persisted forms. Field names are the journal's; times are RFC 3339.
type (
	alipayTradeState struct {
		AppID        string              `json:"app_id"`
		OutTradeNo   string              `json:"out_trade_no"`
		Subject      string              `json:"subject"`
		Amount       int64               `json:"amount"`
		NotifyURL    string              `json:"notify_url,omitempty"`
		Method       orderpay.PayMethod  `json:"method,omitempty"`
		Barcode      *alipayBarcodeState `json:"barcode,omitempty"`
		QRCode       string              `json:"qr_code,omitempty"`
		QRExpiresAt  time.Time           `json:"qr_expires_at"`
		PayDeadline  time.Time           `json:"pay_deadline"`
		Status       string              `json:"status,omitempty"`
		Seq          int64               `json:"seq"`
		TradeNo      string              `json:"trade_no,omitempty"`
		BuyerUserID  string              `json:"buyer_user_id,omitempty"`
		BuyerLogonID string              `json:"buyer_logon_id,omitempty"`
		CreatedAt    time.Time           `json:"created_at"`
		PaidAt       time.Time           `json:"paid_at"`
		NotifyID     string              `json:"notify_id,omitempty"`
		Cancelled    bool                `json:"cancelled,omitempty"`
		CancelAction string              `json:"cancel_action,omitempty"`
		Refunds      []alipayRefundState `json:"refunds,omitempty"`
	}
	alipayBarcodeState struct {
		AuthCode   string    `json:"auth_code"`
		Scene      string    `json:"scene"`
		StoreID    string    `json:"store_id,omitempty"`
		TerminalID string    `json:"terminal_id,omitempty"`
		Behaviour  string    `json:"behaviour,omitempty"`
		PayAt      time.Time `json:"pay_at"`
		Notified   bool      `json:"notified,omitempty"`
	}
	alipayRefundState struct {
		OutRequestNo string    `json:"out_request_no"`
		Amount       int64     `json:"amount"`
		Reason       string    `json:"reason,omitempty"`
		ByCancel     bool      `json:"by_cancel,omitempty"`
		Seq          int64     `json:"seq"`
		RequestedAt  time.Time `json:"requested_at"`
		SettlesAt    time.Time `json:"settles_at"`
		NotifyID     string    `json:"notify_id,omitempty"`
	}
	wechatOrderState struct {
		OutTradeNo    string               `json:"out_trade_no"`
		Seq           int64                `json:"seq"`
		Prepay        wechatPrepayState    `json:"prepay"`
		CreatedAt     time.Time            `json:"created_at"`
		TimeExpire    time.Time            `json:"time_expire"`
		CodeURL       string               `json:"code_url,omitempty"`
		Scanned       bool                 `json:"scanned,omitempty"`
		PaidAt        time.Time            `json:"paid_at"`
		TransactionID string               `json:"transaction_id,omitempty"`
		OpenID        string               `json:"openid,omitempty"`
		NotifyID      string               `json:"notify_id,omitempty"`
		ClosedAt      time.Time            `json:"closed_at"`
		Refunds       []wechatRefundState  `json:"refunds,omitempty"`
		Micropay      *wechatMicropayState `json:"micropay,omitempty"`
	}
	wechatPrepayState struct {
		TradeType   string    `json:"trade_type"`
		OpenID      string    `json:"openid,omitempty"`
		AppID       string    `json:"appid"`
		Description string    `json:"description"`
		Attach      string    `json:"attach,omitempty"`
		NotifyURL   string    `json:"notify_url,omitempty"`
		Total       int64     `json:"total"`
		Currency    string    `json:"currency,omitempty"`
		TimeExpire  time.Time `json:"time_expire"`
	}
	wechatRefundState struct {
		OutRefundNo string    `json:"out_refund_no"`
		RefundID    string    `json:"refund_id"`
		Amount      int64     `json:"amount"`
		Reason      string    `json:"reason,omitempty"`
		CreatedAt   time.Time `json:"created_at"`
		SettlesAt   time.Time `json:"settles_at"`
		End         string    `json:"end,omitempty"`
		NotifyURL   string    `json:"notify_url,omitempty"`
		NotifyID    string    `json:"notify_id,omitempty"`
		Notified    bool      `json:"notified,omitempty"`
	}
	wechatMicropayState struct {
		AuthCode  string    `json:"auth_code"`
		Behaviour string    `json:"behaviour,omitempty"`
		DeviceIP  string    `json:"device_ip,omitempty"`
		StoreID   string    `json:"store_id,omitempty"`
		PayAt     time.Time `json:"pay_at"`
		WrongAt   time.Time `json:"wrong_at"`
		FailsAt   time.Time `json:"fails_at"`
		FailedAt  time.Time `json:"failed_at"`
		RevokedAt time.Time `json:"revoked_at"`
	}
	prepayIDState struct {
		OutTradeNo string    `json:"out_trade_no"`
		CreatedAt  time.Time `json:"created_at"`
		ExpiresAt  time.Time `json:"expires_at"`
		ClientIP   string    `json:"client_ip,omitempty"`
	}
	payCodeState struct {
		Channel    string        `json:"channel"`
		Buyer      string        `json:"buyer,omitempty"`
		Behaviour  string        `json:"behaviour,omitempty"`
		After      time.Duration `json:"after,omitempty"`
		IssuedAt   time.Time     `json:"issued_at"`
		ExpiresAt  time.Time     `json:"expires_at"`
		OutTradeNo string        `json:"out_trade_no,omitempty"`
		UsedAt     time.Time     `json:"used_at"`
	}
	shortageState struct {
		Since     time.Time     `json:"since"`
		CureAfter time.Duration `json:"cure_after,omitempty"`
	}
	// notifyState is a notification still due: which one (rebuilt from its trade or refund
	// at start), how many attempts were made, and when the next is due (simulated time).
	notifyState struct {
		Channel     string    `json:"channel"`
		OutTradeNo  string    `json:"out_trade_no"`
		OutRefundNo string    `json:"out_refund_no,omitempty"`
		Attempts    int       `json:"attempts"`
		NextAt      time.Time `json:"next_at"`
	}
)

func alipayTradeStateOf(t *alipayTrade) alipayTradeState {
	st := alipayTradeState{AppID: t.appID, OutTradeNo: t.outTradeNo, Subject: t.subject, Amount: t.amount, NotifyURL: t.notifyURL,
		Method: t.method, QRCode: t.qrCode, QRExpiresAt: t.qrExpiresAt, PayDeadline: t.payDeadline, Status: t.status, Seq: t.seq,
		TradeNo: t.tradeNo, BuyerUserID: t.buyerUserID, BuyerLogonID: t.buyerLogonID, CreatedAt: t.createdAt, PaidAt: t.paidAt,
		NotifyID: t.notifyID, Cancelled: t.cancelled, CancelAction: t.cancelAction}
	if b := t.barcode; b != nil {
		st.Barcode = &alipayBarcodeState{AuthCode: b.authCode, Scene: b.scene, StoreID: b.storeID, TerminalID: b.terminalID,
			Behaviour: b.behaviour, PayAt: b.payAt, Notified: b.notified}
	}
	for _, r := range t.refunds {
		st.Refunds = append(st.Refunds, alipayRefundState{OutRequestNo: r.outRequestNo, Amount: r.amount, Reason: r.reason,
			ByCancel: r.byCancel, Seq: r.seq, RequestedAt: r.requestedAt, SettlesAt: r.settlesAt, NotifyID: r.notifyID})
	}
	return st
}

func (st alipayTradeState) trade() *alipayTrade {
	t := &alipayTrade{appID: st.AppID, outTradeNo: st.OutTradeNo, subject: st.Subject, amount: st.Amount, notifyURL: st.NotifyURL,
		method: st.Method, qrCode: st.QRCode, qrExpiresAt: st.QRExpiresAt, payDeadline: st.PayDeadline, status: st.Status, seq: st.Seq,
		tradeNo: st.TradeNo, buyerUserID: st.BuyerUserID, buyerLogonID: st.BuyerLogonID, createdAt: st.CreatedAt, paidAt: st.PaidAt,
		notifyID: st.NotifyID, cancelled: st.Cancelled, cancelAction: st.CancelAction}
	if b := st.Barcode; b != nil {
		t.barcode = &alipayBarcode{authCode: b.AuthCode, scene: b.Scene, storeID: b.StoreID, terminalID: b.TerminalID,
			behaviour: b.Behaviour, payAt: b.PayAt, notified: b.Notified}
	}
	for _, r := range st.Refunds {
		t.refunds = append(t.refunds, &alipayRefund{outRequestNo: r.OutRequestNo, amount: r.Amount, reason: r.Reason,
			byCancel: r.ByCancel, seq: r.Seq, requestedAt: r.RequestedAt, settlesAt: r.SettlesAt, notifyID: r.NotifyID})
	}
	return t
}

func wechatOrderStateOf(o *wechatOrder) wechatOrderState {
	p := o.prepay
	st := wechatOrderState{OutTradeNo: o.outTradeNo, Seq: o.seq, CreatedAt: o.createdAt, TimeExpire: o.timeExpire, CodeURL: o.codeURL,
		Scanned: o.scanned, PaidAt: o.paidAt, TransactionID: o.transactionID, OpenID: o.openID, NotifyID: o.notifyID, ClosedAt: o.closedAt,
		Prepay: wechatPrepayState{TradeType: p.tradeType, OpenID: p.openID, AppID: p.appID, Description: p.description, Attach: p.attach,
			NotifyURL: p.notifyURL, Total: p.total, Currency: p.currency, TimeExpire: p.timeExpire}}
	for _, r := range o.refunds {
		st.Refunds = append(st.Refunds, wechatRefundState{OutRefundNo: r.outRefundNo, RefundID: r.refundID, Amount: r.amount,
			Reason: r.reason, CreatedAt: r.createdAt, SettlesAt: r.settlesAt, End: r.end, NotifyURL: r.notifyURL, NotifyID: r.notifyID,
			Notified: r.notified})
	}
	if m := o.micropay; m != nil {
		st.Micropay = &wechatMicropayState{AuthCode: m.authCode, Behaviour: m.behaviour, DeviceIP: m.deviceIP, StoreID: m.storeID,
			PayAt: m.payAt, WrongAt: m.wrongAt, FailsAt: m.failsAt, FailedAt: m.failedAt, RevokedAt: m.revokedAt}
	}
	return st
}

func (st wechatOrderState) order() *wechatOrder {
	p := st.Prepay
	o := &wechatOrder{outTradeNo: st.OutTradeNo, seq: st.Seq, createdAt: st.CreatedAt, timeExpire: st.TimeExpire, codeURL: st.CodeURL,
		scanned: st.Scanned, paidAt: st.PaidAt, transactionID: st.TransactionID, openID: st.OpenID, notifyID: st.NotifyID, closedAt: st.ClosedAt,
		prepay: wechatPrepay{tradeType: p.TradeType, openID: p.OpenID, appID: p.AppID, description: p.Description, attach: p.Attach,
			notifyURL: p.NotifyURL, total: p.Total, currency: p.Currency, timeExpire: p.TimeExpire}}
	for _, r := range st.Refunds {
		o.refunds = append(o.refunds, &wechatRefund{outRefundNo: r.OutRefundNo, refundID: r.RefundID, order: o, amount: r.Amount,
			reason: r.Reason, createdAt: r.CreatedAt, settlesAt: r.SettlesAt, end: r.End, notifyURL: r.NotifyURL, notifyID: r.NotifyID,
			notified: r.Notified})
	}
	if m := st.Micropay; m != nil {
		o.micropay = &wechatMicropay{authCode: m.AuthCode, behaviour: m.Behaviour, deviceIP: m.DeviceIP, storeID: m.StoreID,
			payAt: m.PayAt, wrongAt: m.WrongAt, failsAt: m.FailsAt, failedAt: m.FailedAt, revokedAt: m.RevokedAt}
	}
	return o
}

func prepayIDStateOf(p *wechatPrepayID) prepayIDState {
	return prepayIDState{OutTradeNo: p.order.outTradeNo, CreatedAt: p.createdAt, ExpiresAt: p.expiresAt, ClientIP: p.clientIP}
}

func notifyStateOf(n *outgoingNotification, attempts int, next time.Time) notifyState {
	return notifyState{Channel: n.Channel, OutTradeNo: n.OutTradeNo, OutRefundNo: n.OutRefundNo, Attempts: attempts, NextAt: next}
}

func payCodeStateOf(c *payCode) payCodeState {
	return payCodeState{Channel: c.channel, Buyer: c.buyer, Behaviour: c.behaviour, After: c.after, IssuedAt: c.issuedAt,
		ExpiresAt: c.expiresAt, OutTradeNo: c.outTradeNo, UsedAt: c.usedAt}
}

// openState replays the journal in cfg.StateDir into s, writes it afresh, and opens it for
// the changes to come. It returns the notifications still due, to start once s is ready.
func (s *Simulator) openState(dir string) ([]outgoingNotification, error) {
	if err := os.MkdirAll(dir, stateDirMode); err != nil {
		return nil, fmt.Errorf("sim: state directory: %w", err)
	}
	path := filepath.Join(dir, journalFile)
	records, err := readJournal(path, s.log)
	if err != nil {
		return nil, err
	}
	notes, err := s.restore(records, path)
	if err != nil {
		return nil, err
	}
	s.dirty = newDirtySet()
	s.alipay.dirty, s.wechat.dirty, s.codes.dirty = s.dirty, s.dirty, s.dirty
	// The fresh journal is the state as restored, encoded as the changes to come encode
	// it, so that a later look at an unchanged object writes nothing.
	var fresh []journalRecord
	put := func(kind, id string, v any) error {
		b, sum, err := encodeState(v)
		if err != nil {
			return err
		}
		s.dirty.written[journalKey{kind, id}] = sum
		fresh = append(fresh, journalRecord{Kind: kind, ID: id, Value: b})
		return nil
	}
	var errs []error
	for _, t := range s.alipay.byOutTradeNo {
		errs = append(errs, put(kindAlipayTrade, t.outTradeNo, alipayTradeStateOf(t)))
	}
	for _, o := range s.wechat.byOutTradeNo {
		errs = append(errs, put(kindWechatOrder, o.outTradeNo, wechatOrderStateOf(o)))
	}
	for _, p := range s.wechat.prepayIDs {
		errs = append(errs, put(kindPrepayID, p.id, prepayIDStateOf(p)))
	}
	for _, c := range s.codes.byCode {
		errs = append(errs, put(kindPayCode, c.code, payCodeStateOf(c)))
	}
	for ch, sh := range s.shortages {
		errs = append(errs, put(kindShortage, ch, shortageState{Since: sh.since, CureAfter: sh.cureAfter}))
	}
	for _, n := range notes {
		errs = append(errs, put(kindNotify, n.NotifyID, notifyStateOf(&n, n.Resume, n.NotBefore)))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	j, err := openJournal(path, fresh, s.log)
	if err != nil {
		return nil, err
	}
	s.journal = j
	return notes, nil
}

// restore rebuilds the books from the journal's records, and the notifications still due.
// The caller has not started s yet.
func (s *Simulator) restore(records map[journalKey]journalRecord, path string) ([]outgoingNotification, error) {
	decode := func(rec journalRecord, v any) error {
		if err := json.Unmarshal(rec.Value, v); err != nil {
			return fmt.Errorf("sim: state journal %s: %s %s: %v", path, rec.Kind, rec.ID, err)
		}
		return nil
	}
	var pending []journalRecord
	var codes []*payCode
	for k, rec := range records {
		switch k.kind {
		case kindAlipayTrade:
			var st alipayTradeState
			if err := decode(rec, &st); err != nil {
				return nil, err
			}
			t := st.trade()
			s.alipay.byOutTradeNo[t.outTradeNo] = t
			if t.qrCode != "" {
				s.alipay.byQRCode[t.qrCode] = t
			}
			if t.tradeNo != "" {
				s.alipay.byTradeNo[t.tradeNo] = t
			}
			s.seq = max(s.seq, t.seq)
			for _, r := range t.refunds {
				s.alipay.refundSeq = max(s.alipay.refundSeq, r.seq)
			}
			if t.barcode != nil && !t.barcode.notified && t.notifyURL != "" && !t.paid() && t.status == AlipayWaitBuyerPay {
				s.alipay.barcodeWaiting = append(s.alipay.barcodeWaiting, t)
			}
		case kindWechatOrder:
			var st wechatOrderState
			if err := decode(rec, &st); err != nil {
				return nil, err
			}
			o := st.order()
			s.wechat.byOutTradeNo[o.outTradeNo] = o
			if o.codeURL != "" {
				s.wechat.byCode[o.codeURL] = o
			}
			if o.transactionID != "" {
				s.wechat.byTransactionID[o.transactionID] = o
			}
			s.seq = max(s.seq, o.seq)
			for _, r := range o.refunds {
				s.wechat.refunds[r.outRefundNo] = r
				s.wechat.refundIDs[r.refundID] = true
				if r.notifyURL != "" && !r.notified {
					s.wechat.settling = append(s.wechat.settling, r)
				}
			}
			if m := o.micropay; m != nil && !o.paid() && m.failedAt.IsZero() && m.revokedAt.IsZero() {
				s.wechat.userPaying = append(s.wechat.userPaying, o)
			}
		case kindPayCode:
			var st payCodeState
			if err := decode(rec, &st); err != nil {
				return nil, err
			}
			codes = append(codes, &payCode{code: k.id, channel: st.Channel, buyer: st.Buyer, behaviour: st.Behaviour, after: st.After,
				issuedAt: st.IssuedAt, expiresAt: st.ExpiresAt, outTradeNo: st.OutTradeNo, usedAt: st.UsedAt})
		case kindShortage:
			var st shortageState
			if err := decode(rec, &st); err != nil {
				return nil, err
			}
			s.shortages[k.id] = shortage{since: st.Since, cureAfter: st.CureAfter}
		case kindNotify, kindPrepayID:
			pending = append(pending, rec) // need the orders first
		default:
			s.log.Warn("sim: state journal: unknown record kind, skipped", "file", path, "kind", k.kind, "id", k.id)
		}
	}
	slices.SortFunc(codes, func(a, b *payCode) int { return a.issuedAt.Compare(b.issuedAt) })
	for _, c := range codes {
		s.codes.byCode[c.code] = c
		s.codes.issued = append(s.codes.issued, c)
	}
	sortBySeq := func(a, b *wechatOrder) int { return int(a.seq - b.seq) }
	slices.SortFunc(s.wechat.userPaying, sortBySeq)
	var notes []outgoingNotification
	for _, rec := range pending {
		if rec.Kind == kindPrepayID {
			var st prepayIDState
			if err := decode(rec, &st); err != nil {
				return nil, err
			}
			if o := s.wechat.byOutTradeNo[st.OutTradeNo]; o != nil {
				s.wechat.prepayIDs[rec.ID] = &wechatPrepayID{id: rec.ID, order: o, createdAt: st.CreatedAt, expiresAt: st.ExpiresAt, clientIP: st.ClientIP}
			}
			continue
		}
		var st notifyState
		if err := decode(rec, &st); err != nil {
			return nil, err
		}
		n := s.rebuildNotification(st)
		if n == nil || n.NotifyID != rec.ID {
			s.log.Warn("sim: state journal: a notification due names nothing it can be built from, dropped",
				"file", path, "notify_id", rec.ID, "channel", st.Channel, "out_trade_no", st.OutTradeNo, "out_refund_no", st.OutRefundNo)
			continue
		}
		n.Resume, n.NotBefore = st.Attempts, st.NextAt
		notes = append(notes, *n)
	}
	slices.SortFunc(notes, func(a, b outgoingNotification) int { return a.NotBefore.Compare(b.NotBefore) })
	return notes, nil
}

// rebuildNotification makes the notification st names again from its trade or refund, as
// the channel made it the first time; nil if they are not known.
func (s *Simulator) rebuildNotification(st notifyState) *outgoingNotification {
	switch st.Channel {
	case orderpay.ChannelAlipay:
		t := s.alipay.byOutTradeNo[st.OutTradeNo]
		if t == nil {
			return nil
		}
		if st.OutRefundNo == "" {
			if !t.paid() {
				return nil
			}
			return s.alipayNotification(t)
		}
		r := t.refund(st.OutRefundNo)
		if r == nil {
			return nil
		}
		return s.alipayRefundNotification(t, r)
	case orderpay.ChannelWechat:
		if st.OutRefundNo == "" {
			o := s.wechat.byOutTradeNo[st.OutTradeNo]
			if o == nil || !o.paid() {
				return nil
			}
			return s.wechatNotification(o)
		}
		r := s.wechat.refunds[st.OutRefundNo]
		if r == nil {
			return nil
		}
		n := s.wechatRefundNotification(r, r.settlesAt)
		return &n
	}
	return nil
}

// journalNotify records how far the delivery of n got: attempts made and the next due at
// next, or, when done, that no attempt is due any more. The notifier calls it.
func (s *Simulator) journalNotify(n *outgoingNotification, attempts int, next time.Time, done bool) {
	if done {
		s.journal.put(kindNotify, n.NotifyID, nil)
		return
	}
	s.journal.put(kindNotify, n.NotifyID, notifyStateOf(n, attempts, next))
}
