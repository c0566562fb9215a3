package sim

import (
	"time"

	"orderpay"
)

// Actions of alipay.trade.cancel (docs/channels.md §A3).
const (
	alipayCancelClose  = "close"  // closed, nothing refunded
	alipayCancelRefund = "refund" // the trade had been paid; the cancel refunded it in full
)

// alipayMaxRequestNo is the longest out_request_no Alipay accepts.
const alipayMaxRequestNo = 64

// alipayRefund is one refund the simulated Alipay accepted.
type alipayRefund struct {
	outRequestNo string
	amount       int64 // fen
	reason       string
	byCancel     bool  // the full refund alipay.trade.cancel made of a paid trade
	seq          int64 // acceptance order across trades
	requestedAt  time.Time
	// settlesAt is when the money moves: Config.RefundDelay after acceptance, or a
	// FaultSlow rule's Delay. Settlement is lazy, like the timeout closing in refresh: a
	// refund is settled whenever it is looked at from settlesAt on.
	settlesAt time.Time
	// notifyID is the notify_id of the refund's notification; "" if it has none.
	notifyID string
}

func (r *alipayRefund) settled(now time.Time) bool { return !now.Before(r.settlesAt) }

// refund returns the trade's refund numbered outRequestNo, or nil.
func (t *alipayTrade) refund(outRequestNo string) *alipayRefund {
	for _, r := range t.refunds {
		if r.outRequestNo == outRequestNo {
			return r
		}
	}
	return nil
}

// acceptedTotal is the sum of every accepted refund, settled or not: what can no longer be
// refunded again.
func (t *alipayTrade) acceptedTotal() int64 {
	var sum int64
	for _, r := range t.refunds {
		sum += r.amount
	}
	return sum
}

// ledgerRefunds lists t's refunds for the ledger at now, or nil if it has none.
func (t *alipayTrade) ledgerRefunds(now time.Time) []LedgerRefund {
	var out []LedgerRefund
	for _, r := range t.refunds {
		l := LedgerRefund{OutRefundNo: r.outRequestNo, Amount: r.amount, Status: LedgerRefundProcessing}
		if r.settled(now) {
			l.Status, l.SettledAt = LedgerRefundSuccess, r.settlesAt
		}
		out = append(out, l)
	}
	return out
}

// refundedTotal is the sum of the refunds settled by now: money that went back.
func (t *alipayTrade) refundedTotal(now time.Time) int64 {
	var sum int64
	for _, r := range t.refunds {
		if r.settled(now) {
			sum += r.amount
		}
	}
	return sum
}

// addRefund records an accepted refund of t that settles settleAfter from now (at once if
// zero), and queues its notification for when it settles (docs/channels.md §E). The caller holds
// s.mu and has checked that it fits in what remains.
func (s *Simulator) addRefund(t *alipayTrade, outRequestNo string, amount int64, reason string, byCancel bool, now time.Time, settleAfter time.Duration) *alipayRefund {
	s.alipay.refundSeq++
	r := &alipayRefund{
		outRequestNo: outRequestNo,
		amount:       amount,
		reason:       reason,
		byCancel:     byCancel,
		seq:          s.alipay.refundSeq,
		requestedAt:  now,
		settlesAt:    now.Add(settleAfter),
	}
	t.refunds = append(t.refunds, r)
	t.refresh(now)
	if note := s.alipayRefundNotification(t, r); note != nil {
		// Safe under s.mu: the notifier never takes it.
		s.notifier.enqueue(*note)
	}
	return r
}

// alipayClose serves alipay.trade.close (docs/channels.md §A3): it closes only a scanned trade
// waiting for payment.
//
// An unscanned code is not a trade yet, so the answer is ACQ.TRADE_NOT_EXIST and the code
// is left as it is: it stays scannable until the deadline passed at precreate (or the end
// of its QR lifetime). Whether the real gateway also disables a pending code on close is
// unverified; leaving it scannable is the harsher choice for orderpay, which therefore
// relies on the deadline it passed at precreate, not on close. alipay.trade.cancel does
// disable a pending code.
func (s *Simulator) alipayClose(app *alipayApp, biz bizContent) alipayReply {
	return s.withScannedTrade(app, biz, func(t *alipayTrade) alipayReply {
		if t.status != AlipayWaitBuyerPay {
			// Paid, refunded, finished or already closed: close changes nothing.
			return alipayFailure("40004", "ACQ.TRADE_STATUS_ERROR", "交易状态不合法")
		}
		t.status = AlipayTradeClosed
		r := alipaySuccess()
		r.TradeNo = t.tradeNo
		r.OutTradeNo = t.outTradeNo
		return r
	})
}

// alipayCancel serves alipay.trade.cancel, the call for a payment whose result is unknown
// (docs/channels.md §A3): whatever state the trade is in, afterwards nothing can be paid under
// the out_trade_no and any money paid goes back.
//
//   - An unscanned code is cancelled: it can never be scanned. action=close.
//   - An out_trade_no never precreated is recorded as cancelled, so that a precreate still
//     on its way (the call whose result was unknown) is refused with ACQ.TRADE_HAS_CLOSE.
//     action=close. (The real answer for an unknown number is unverified: it may be
//     ACQ.TRADE_NOT_EXIST. The adapter handles both.)
//   - WAIT_BUYER_PAY is closed. action=close.
//   - TRADE_SUCCESS without refunds is refunded in full, with a refund whose
//     out_request_no is the out_trade_no (§A3: the refund number of a refund that had
//     none), settling after Config.RefundDelay; the trade becomes TRADE_CLOSED when it
//     settles. action=refund.
//   - An unpaid TRADE_CLOSED: action=close.
//   - A paid trade that already has refunds (partial, or fully refunded and so
//     TRADE_CLOSED), or TRADE_FINISHED: 40004 ACQ.TRADE_STATUS_ERROR. Cancel is for a
//     result that is unknown, and refunds show the payment was known; use refund.
//
// A repeated cancel answers what the first successful one did, so a cancel whose answer
// was lost can be resent. Answers and refusals carry retry_flag=N; a failed cancel (a
// system or unknown error, or a rate limit, from a fault) carries retry_flag=Y. A trade
// made more than 24 h ago (alipayCancelWindow, §D) can no longer be cancelled: 40004
// ACQ.TRADE_CANCEL_TIME_OUT, retry_flag=N. A number the merchant's other app holds is, to
// app, ACQ.TRADE_NOT_EXIST, and is left as it is.
func (s *Simulator) alipayCancel(app *alipayApp, biz bizContent) alipayReply {
	outTradeNo, tradeNo, fail := tradeIDs(biz)
	if fail != nil {
		return *fail
	}
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.alipay.find(outTradeNo, tradeNo)
	if t == nil {
		if outTradeNo == "" {
			// A trade_no Alipay never issued.
			return alipayFailure("40004", "ACQ.TRADE_NOT_EXIST", "交易不存在")
		}
		if !outTradeNoPattern.MatchString(outTradeNo) {
			return alipayFailure("40004", "ACQ.INVALID_PARAMETER", "out_trade_no must be 1 to 64 letters, digits or underscores")
		}
		t = &alipayTrade{appID: app.AppID, outTradeNo: outTradeNo}
		s.alipay.byOutTradeNo[outTradeNo] = t
		s.alipay.touch(t)
	}
	if !t.ofApp(app) {
		return alipayFailure("40004", "ACQ.TRADE_NOT_EXIST", "交易不存在")
	}
	t.refresh(now)
	if t.cancelAction != "" {
		return alipayCancelOK(t, t.cancelAction)
	}
	if t.scanned() && !now.Before(t.createdAt.Add(alipayCancelWindow)) {
		// Past the cancel window (§D): a paid trade is refunded by alipay.trade.refund, an
		// unpaid one closed by alipay.trade.close. Retrying does not change it.
		r := alipayFailure("40004", "ACQ.TRADE_CANCEL_TIME_OUT", "超过撤销时间范围，请使用退款接口")
		r.RetryFlag = "N"
		return r
	}
	switch {
	case !t.scanned():
		t.cancelled = true
		t.cancelAction = alipayCancelClose
	case t.status == AlipayWaitBuyerPay:
		t.status = AlipayTradeClosed
		t.cancelled = true
		t.cancelAction = alipayCancelClose
	case t.status == AlipayTradeSuccess && len(t.refunds) == 0:
		t.cancelled = true
		t.cancelAction = alipayCancelRefund
		// Refund faults act on alipay.trade.refund only: the cancel's refund settles after
		// Config.RefundDelay whatever the account's balance.
		s.addRefund(t, t.outTradeNo, t.amount, "交易撤销", true, now, s.cfg.RefundDelay)
	case t.status == AlipayTradeClosed && !t.paid():
		t.cancelled = true
		t.cancelAction = alipayCancelClose
	default:
		// A refusal that retrying does not change: retry_flag=N.
		r := alipayFailure("40004", "ACQ.TRADE_STATUS_ERROR", "交易状态不合法")
		r.RetryFlag = "N"
		return r
	}
	return alipayCancelOK(t, t.cancelAction)
}

func alipayCancelOK(t *alipayTrade, action string) alipayReply {
	r := alipaySuccess()
	r.TradeNo = t.tradeNo
	r.OutTradeNo = t.outTradeNo
	r.RetryFlag = "N"
	r.Action = action
	return r
}

// alipayRefund serves alipay.trade.refund (docs/channels.md §A3).
//
// out_request_no defaults to the out_trade_no. A number already used on the trade with the
// same refund_amount is a resend: it answers as the refund stands now and refunds nothing
// more (a resend after settlement says fund_change=Y; the real gateway may say N for a
// resend, which the adapter reads as pending). The same number with another amount is
// ACQ.DISCORDANT_REPEAT_REQUEST; other parameters, such as refund_reason, are not
// compared. Only a TRADE_SUCCESS trade can be refunded (TRADE_FINISHED:
// ACQ.TRADE_HAS_FINISHED; unpaid or closed: ACQ.TRADE_STATUS_ERROR), and the refunds
// accepted so far plus this one can never exceed the amount paid: otherwise
// ACQ.REFUND_AMT_NOT_EQUAL_TOTAL (退款金额超限, the sub_code third-party tables give).
//
// A refund that passes all of this is new, and meets the refund faults (drawRefundFaults)
// before it is accepted: while the merchant's account is short (FaultBalance) it is refused
// with 40004 ACQ.SELLER_BALANCE_NOT_ENOUGH (卖家余额不足) and nothing is recorded, so the
// same request under the same number is a new refund once the account is covered; a
// FaultSlow rule makes it settle after the rule's Delay. A trade of the merchant's other app
// is ACQ.TRADE_NOT_EXIST, as an unscanned one.
//
// The answer is 10000 with fund_change=Y once the money has moved (Config.RefundDelay
// after acceptance, at once by default, or a slow fault's Delay), N before; refund_fee is
// the total settled so far on the trade (累计已退款成功的金额), so it includes this refund
// only once settled; gmt_refund_pay is the settlement time, absent before.
func (s *Simulator) alipayRefund(app *alipayApp, biz bizContent) alipayReply {
	outTradeNo, tradeNo, fail := tradeIDs(biz)
	if fail != nil {
		return *fail
	}
	invalid := func(msg string) alipayReply { return alipayFailure("40004", "ACQ.INVALID_PARAMETER", msg) }
	amountText, err1 := biz.str("refund_amount")
	requestNo, err2 := biz.str("out_request_no")
	reason, err3 := biz.str("refund_reason")
	if err1 != nil || err2 != nil || err3 != nil {
		return invalid("refund_amount, out_request_no and refund_reason must be strings")
	}
	amount, err := orderpay.ParseYuan(amountText)
	if err != nil || amount < 1 || amount > orderpay.MaxChannelAmount {
		return invalid("refund_amount must be a yuan amount with at most two decimals in [0.01, 100000000]")
	}
	if len(requestNo) > alipayMaxRequestNo {
		return invalid("out_request_no must be at most 64 characters")
	}

	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.alipay.find(outTradeNo, tradeNo)
	if t == nil || !t.scanned() || !t.ofApp(app) {
		return alipayFailure("40004", "ACQ.TRADE_NOT_EXIST", "交易不存在")
	}
	if requestNo == "" {
		requestNo = t.outTradeNo
	}
	t.refresh(now)
	if r := t.refund(requestNo); r != nil {
		// Checked before the trade's status: a trade refunded in full is TRADE_CLOSED, and
		// resending its last refund must still get the same answer.
		if r.amount != amount {
			return alipayFailure("40004", "ACQ.DISCORDANT_REPEAT_REQUEST", "请求信息不一致")
		}
		return alipayRefundOK(t, r, now)
	}
	switch t.status {
	case AlipayTradeSuccess:
	case AlipayTradeFinished:
		return alipayFailure("40004", "ACQ.TRADE_HAS_FINISHED", "交易已完结")
	default:
		return alipayFailure("40004", "ACQ.TRADE_STATUS_ERROR", "交易状态不合法")
	}
	if t.acceptedTotal()+amount > t.amount {
		return alipayFailure("40004", "ACQ.REFUND_AMT_NOT_EQUAL_TOTAL", "退款金额超限")
	}
	draw := s.drawRefundFaults(orderpay.ChannelAlipay, t.outTradeNo, now)
	if draw.refuse == FaultBalance {
		return alipayFailure("40004", "ACQ.SELLER_BALANCE_NOT_ENOUGH", "卖家余额不足")
	}
	r := s.addRefund(t, requestNo, amount, reason, false, now, draw.settleAfter)
	return alipayRefundOK(t, r, now)
}

func alipayRefundOK(t *alipayTrade, r *alipayRefund, now time.Time) alipayReply {
	reply := alipaySuccess()
	reply.TradeNo = t.tradeNo
	reply.OutTradeNo = t.outTradeNo
	reply.BuyerLogonID = t.buyerLogonID
	reply.BuyerUserID = t.buyerUserID
	reply.RefundFee = orderpay.FormatYuan(t.refundedTotal(now))
	reply.FundChange = "N"
	if r.settled(now) {
		reply.FundChange = "Y"
		reply.GmtRefundPay = r.settlesAt.In(cst).Format(alipayTimeLayout)
	}
	return reply
}

// alipayRefundQuery serves alipay.trade.fastpay.refund.query (docs/channels.md §A3). out_request_no
// defaults to the out_trade_no. A settled refund answers refund_status=REFUND_SUCCESS with
// its refund_amount, the trade's total_amount and gmt_refund_pay. A refund accepted but
// not settled yet, or no refund under that number, answers 10000 without refund_status:
// Alipay's way of saying "not received, or failed". An unscanned or unknown trade, or one of
// the merchant's other app, is ACQ.TRADE_NOT_EXIST.
func (s *Simulator) alipayRefundQuery(app *alipayApp, biz bizContent) alipayReply {
	outTradeNo, tradeNo, fail := tradeIDs(biz)
	if fail != nil {
		return *fail
	}
	requestNo, err := biz.str("out_request_no")
	if err != nil {
		return alipayFailure("40004", "ACQ.INVALID_PARAMETER", "out_request_no must be a string")
	}
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.alipay.find(outTradeNo, tradeNo)
	if t == nil || !t.scanned() || !t.ofApp(app) {
		return alipayFailure("40004", "ACQ.TRADE_NOT_EXIST", "交易不存在")
	}
	if requestNo == "" {
		requestNo = t.outTradeNo
	}
	t.refresh(now)
	reply := alipaySuccess()
	reply.TradeNo = t.tradeNo
	reply.OutTradeNo = t.outTradeNo
	r := t.refund(requestNo)
	if r == nil || !r.settled(now) {
		return reply
	}
	reply.OutRequestNo = r.outRequestNo
	reply.TotalAmount = orderpay.FormatYuan(t.amount)
	reply.RefundAmount = orderpay.FormatYuan(r.amount)
	reply.RefundStatus = "REFUND_SUCCESS"
	reply.GmtRefundPay = r.settlesAt.In(cst).Format(alipayTimeLayout)
	return reply
}

// AlipayRefund is one refund the simulated Alipay accepted. Amounts are fen.
type AlipayRefund struct {
	OutTradeNo   string
	OutRequestNo string
	Amount       int64
	Reason       string
	// ByCancel marks the full refund alipay.trade.cancel made of a paid trade; its
	// OutRequestNo is the OutTradeNo.
	ByCancel bool
	// RequestedAt is when the channel accepted the refund; SettlesAt when the money moves
	// (RequestedAt plus Config.RefundDelay, or a slow fault's Delay), and Settled whether
	// that time has come.
	RequestedAt time.Time
	SettlesAt   time.Time
	Settled     bool
}

// AlipayRefunds returns every refund accepted for outTradeNo, in acceptance order, or nil
// if there are none (or no such trade). It is the channel's view, for tests and the chaos
// auditor: the settled ones are what LedgerEntry.Refunded adds up.
func (s *Simulator) AlipayRefunds(outTradeNo string) []AlipayRefund {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.alipay.touch(s.alipay.byOutTradeNo[outTradeNo])
	if t == nil {
		return nil
	}
	t.refresh(now)
	var out []AlipayRefund
	for _, r := range t.refunds {
		out = append(out, AlipayRefund{
			OutTradeNo:   t.outTradeNo,
			OutRequestNo: r.outRequestNo,
			Amount:       r.amount,
			Reason:       r.reason,
			ByCancel:     r.byCancel,
			RequestedAt:  r.requestedAt,
			SettlesAt:    r.settlesAt,
			Settled:      r.settled(now),
		})
	}
	return out
}

// AlipayFinishTrade plays the end of a paid trade's refund period: a TRADE_SUCCESS trade
// becomes TRADE_FINISHED, which can no longer be refunded (§A3). Errors are orderpay
// errors: ENOTFOUND for a number that is not a trade at the channel, ECONFLICT for a trade
// that is not TRADE_SUCCESS.
func (s *Simulator) AlipayFinishTrade(outTradeNo string) error {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.alipay.touch(s.alipay.byOutTradeNo[outTradeNo])
	if t == nil || !t.scanned() {
		return orderpay.Errorf(orderpay.ENOTFOUND, "no alipay trade %s", outTradeNo)
	}
	t.refresh(now)
	if t.status != AlipayTradeSuccess {
		return orderpay.Errorf(orderpay.ECONFLICT, "trade %s is %s, not %s", outTradeNo, t.status, AlipayTradeSuccess)
	}
	t.status = AlipayTradeFinished
	return nil
}
