package sim

import (
	"context"
	"net/http"
	"regexp"
	"time"
	"unicode/utf8"

	"orderpay"
)

// wechatOutRefundNoPattern is WeChat's rule for out_refund_no: 1 to 64 letters, digits or
// _-|*@.
var wechatOutRefundNoPattern = regexp.MustCompile(`^[A-Za-z0-9_\-|*@]{1,64}$`)

// wechatRefundBody is the JSON of POST /v3/refund/domestic/refunds ([WG]
// refunddomestic/models.go CreateRequest).
type wechatRefundBody struct {
	TransactionID *string `json:"transaction_id"`
	OutTradeNo    *string `json:"out_trade_no"`
	OutRefundNo   *string `json:"out_refund_no"`
	Reason        *string `json:"reason"`
	NotifyURL     *string `json:"notify_url"`
	Amount        *struct {
		Refund   *int64  `json:"refund"`
		Total    *int64  `json:"total"`
		Currency *string `json:"currency"`
	} `json:"amount"`
}

// wechatRefundRequest is a validated refund request.
type wechatRefundRequest struct {
	transactionID string
	outTradeNo    string
	outRefundNo   string
	reason        string
	notifyURL     string
	refund        int64
	total         int64
}

var wechatRefundEndpoint = wechatEndpoint{
	method:    MethodRefund,
	key:       (*Simulator).wechatRefundKey,
	run:       (*Simulator).wechatRefund,
	fabricate: (*Simulator).wechatFabricateRefund,
}

var wechatRefundQueryEndpoint = wechatEndpoint{
	method:   MethodRefundQuery,
	key:      (*Simulator).wechatRefundQueryKey,
	run:      (*Simulator).wechatRefundQuery,
	readOnly: true,
}

// wechatRefundKey keys a refund's fault draws on its order's out_trade_no, as every other
// call about that order is keyed (and as Alipay's refunds are): the same trade meets the
// same faults. A refund by transaction_id is keyed on that order's out_trade_no too.
func (s *Simulator) wechatRefundKey(_ *http.Request, body []byte) string {
	if no := bodyField(body, "out_trade_no"); no != "" {
		return no
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := s.wechat.touch(s.wechat.byTransactionID[bodyField(body, "transaction_id")]); o != nil {
		return o.outTradeNo
	}
	return bodyField(body, "out_refund_no")
}

// wechatRefundQueryKey keys a refund query on the refund's out_trade_no, or on the
// out_refund_no of a refund WeChat does not know.
func (s *Simulator) wechatRefundQueryKey(r *http.Request, _ []byte) string {
	no := r.PathValue("out_refund_no")
	s.mu.Lock()
	defer s.mu.Unlock()
	if refund := s.wechat.refunds[no]; refund != nil {
		s.wechat.touch(refund.order)
		return refund.order.outTradeNo
	}
	return no
}

func parseWechatRefund(body []byte) (wechatRefundRequest, *wechatAnswer) {
	fail := func(field, msg string) (wechatRefundRequest, *wechatAnswer) {
		a := wechatParamError(field, "body", msg)
		return wechatRefundRequest{}, &a
	}
	var b wechatRefundBody
	if a := decodeWechatBody(body, &b); a != nil {
		return wechatRefundRequest{}, a
	}
	switch {
	case b.OutRefundNo == nil || !wechatOutRefundNoPattern.MatchString(*b.OutRefundNo):
		return fail("out_refund_no", "out_refund_no 须为1至64位数字、大小写字母或_-|*@")
	case wechatStr(b.OutTradeNo) == "" && wechatStr(b.TransactionID) == "":
		return fail("out_trade_no", "transaction_id 和 out_trade_no 必须二选一")
	case b.Reason != nil && utf8.RuneCountInString(*b.Reason) > 80:
		return fail("reason", "reason 不超过80个字符")
	case b.Amount == nil || b.Amount.Refund == nil || *b.Amount.Refund <= 0:
		return fail("amount.refund", "amount.refund 须为正整数（分）")
	case b.Amount.Total == nil || *b.Amount.Total <= 0:
		return fail("amount.total", "amount.total 须为正整数（分）")
	case b.Amount.Currency == nil || *b.Amount.Currency != "CNY":
		return fail("amount.currency", "amount.currency 必填，仅支持CNY")
	}
	if msg := checkWechatNotifyURL(wechatStr(b.NotifyURL)); msg != "" {
		return fail("notify_url", msg)
	}
	return wechatRefundRequest{
		transactionID: wechatStr(b.TransactionID),
		outTradeNo:    wechatStr(b.OutTradeNo),
		outRefundNo:   *b.OutRefundNo,
		reason:        wechatStr(b.Reason),
		notifyURL:     wechatStr(b.NotifyURL),
		refund:        *b.Amount.Refund,
		total:         *b.Amount.Total,
	}, nil
}

// sameAs reports whether req asks for exactly the refund r: the same order and amounts.
// reason and notify_url move no money and are not compared.
func (req wechatRefundRequest) sameAs(r *wechatRefund) bool {
	o := r.order
	return (req.outTradeNo == "" || req.outTradeNo == o.outTradeNo) &&
		(req.transactionID == "" || req.transactionID == o.transactionID) &&
		req.refund == r.amount && req.total == o.prepay.total
}

// wechatRefund serves POST /v3/refund/domestic/refunds (§B1).
//
// An out_refund_no is one refund: the same request again returns it with its current
// status ("同一退款单号多次请求只退一笔"), and a request under the same number for another
// order or amount is 400 INVALID_REQUEST (Alipay calls it a discordant repeat; WeChat's
// code for it is undocumented). Refunds may never exceed the amount paid, counting those
// still PROCESSING: 400 INVALID_REQUEST. An unknown order is 404 RESOURCE_NOT_EXISTS; an
// unpaid one, or a total that is not the order's, 400 INVALID_REQUEST; a 51st refund of one
// order 400 INVALID_REQUEST (§B1: at most 50).
//
// A refund that passes all of this is new, and meets the refund faults (drawRefundFaults)
// before it is accepted: while the merchant's account is short (FaultBalance) it is refused
// with 403 NOT_ENOUGH (余额不足), and a FaultAccountAbnormal rule refuses it with 403
// USER_ACCOUNT_ABNORMAL, both signed as WeChat signs its refusals of authenticated requests;
// nothing is recorded, so the same request under the same number is a new refund later.
//
// An accepted refund is PROCESSING until Config.RefundDelay (or a slow, abnormal or closed
// fault's Delay) has passed, then SUCCESS, or ABNORMAL or CLOSED if EndWechatRefund or an
// abnormal or closed fault said so, and then its notify_url, if any, gets the REFUND.*
// notification.
func (s *Simulator) wechatRefund(_ *http.Request, body []byte) wechatAnswer {
	req, fail := parseWechatRefund(body)
	if fail != nil {
		return *fail
	}
	now := s.clock.Now()
	s.mu.Lock()
	s.advanceMicropay(now)
	ans := s.createWechatRefund(req, now)
	// With no RefundDelay the refund has ended already: its notification goes now.
	ended := s.wechatRefundsEnded(now)
	s.mu.Unlock()
	s.enqueueAll(ended)
	return ans
}

// createWechatRefund is wechatRefund's work once the request is valid. The caller holds s.mu.
func (s *Simulator) createWechatRefund(req wechatRefundRequest, now time.Time) wechatAnswer {
	if r := s.wechat.refunds[req.outRefundNo]; r != nil {
		s.wechat.touch(r.order)
		if !req.sameAs(r) {
			return wechatError(http.StatusBadRequest, "INVALID_REQUEST", "同一退款单号多次请求，但请求参数不一致")
		}
		return wechatJSON(http.StatusOK, wechatRefundView(r, now))
	}

	var o *wechatOrder
	if req.outTradeNo != "" {
		o = s.wechat.touch(s.wechat.byOutTradeNo[req.outTradeNo])
	} else {
		o = s.wechat.touch(s.wechat.byTransactionID[req.transactionID])
	}
	switch {
	case o == nil:
		return wechatError(http.StatusNotFound, "RESOURCE_NOT_EXISTS", "订单不存在")
	case req.transactionID != "" && req.transactionID != o.transactionID:
		return wechatError(http.StatusBadRequest, "INVALID_REQUEST", "transaction_id 与 out_trade_no 不是同一笔订单")
	case !o.paid():
		return wechatError(http.StatusBadRequest, "INVALID_REQUEST", "订单未支付，不能退款")
	case req.total != o.prepay.total:
		return wechatError(http.StatusBadRequest, "INVALID_REQUEST", "订单金额与原订单金额不一致")
	case req.refund > o.prepay.total-o.refunded(now, false):
		return wechatError(http.StatusBadRequest, "INVALID_REQUEST", "申请退款金额超过订单可退金额")
	case len(o.refunds) >= wechatMaxRefunds:
		return wechatError(http.StatusBadRequest, "INVALID_REQUEST", "订单退款次数超过限制")
	}
	draw := s.drawRefundFaults(orderpay.ChannelWechat, o.outTradeNo, now)
	switch draw.refuse {
	case FaultBalance:
		return wechatError(http.StatusForbidden, "NOT_ENOUGH", "余额不足")
	case FaultAccountAbnormal:
		return wechatError(http.StatusForbidden, "USER_ACCOUNT_ABNORMAL", "退款请求失败：用户账户已注销或状态异常")
	}
	end := s.wechat.refundEnds[req.outRefundNo]
	if draw.end != "" {
		end = draw.end
	}
	r := &wechatRefund{
		outRefundNo: req.outRefundNo,
		refundID:    s.newWechatRefundID(),
		order:       o,
		amount:      req.refund,
		reason:      req.reason,
		createdAt:   now,
		settlesAt:   now.Add(draw.settleAfter),
		end:         end,
		notifyURL:   req.notifyURL,
		notifyID:    newWechatNotifyID(),
	}
	delete(s.wechat.refundEnds, req.outRefundNo)
	o.refunds = append(o.refunds, r)
	s.wechat.refunds[r.outRefundNo] = r
	if r.notifyURL != "" {
		s.wechat.settling = append(s.wechat.settling, r)
	}
	return wechatJSON(http.StatusOK, wechatRefundView(r, now))
}

// EndWechatRefund makes the refund under outRefundNo end with status, WechatRefundAbnormal
// (the money could not go back, e.g. the buyer's card was closed) or WechatRefundClosed,
// instead of SUCCESS: its answers, queries and REFUND.ABNORMAL or REFUND.CLOSED
// notification say so, and its amount can be refunded again. It applies to a refund still
// PROCESSING or, if none was made under that number yet, to the one made later (with no
// Config.RefundDelay a refund ends as it is made, so set it first). A refund that already
// ended is ECONFLICT; another status EINVALID.
func (s *Simulator) EndWechatRefund(outRefundNo, status string) error {
	if status != WechatRefundAbnormal && status != WechatRefundClosed {
		return orderpay.Errorf(orderpay.EINVALID, "a refund can be made to end %s or %s, not %q", WechatRefundAbnormal, WechatRefundClosed, status)
	}
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.wechat.refunds[outRefundNo]
	if r != nil {
		s.wechat.touch(r.order)
	}
	switch {
	case r == nil:
		s.wechat.refundEnds[outRefundNo] = status
	case r.settled(now):
		return orderpay.Errorf(orderpay.ECONFLICT, "refund %s already ended %s", outRefundNo, r.status(now))
	default:
		r.end = status
	}
	return nil
}

// wechatRefundWatchTick is how often (real time) the watcher looks for refunds whose
// RefundDelay has passed on the simulated clock, which tests move by hand.
const wechatRefundWatchTick = 10 * time.Millisecond

// wechatRefundsEnded takes the refunds that reached their final state by now off the
// settling list and returns their notifications; while some are still settling, a watcher
// runs to send theirs when the clock gets there. The caller holds s.mu and enqueues the
// notifications once it has let go of it.
func (s *Simulator) wechatRefundsEnded(now time.Time) []outgoingNotification {
	var ended []outgoingNotification
	still := s.wechat.settling[:0]
	for _, r := range s.wechat.settling {
		if r.settled(now) {
			r.notified = true
			s.wechat.touch(r.order)
			ended = append(ended, s.wechatRefundNotification(r, now))
		} else {
			still = append(still, r)
		}
	}
	clear(s.wechat.settling[len(still):]) // no stale pointers behind the slice's end
	s.wechat.settling = still
	if len(still) > 0 && !s.wechat.watchingRefund {
		s.wechat.watchingRefund = s.notifier.run(s.watchWechatRefunds)
	}
	return ended
}

// watchWechatRefunds sends the notifications of refunds as they end, until none is left
// settling or the simulator closes.
func (s *Simulator) watchWechatRefunds(ctx context.Context) {
	tick := time.NewTicker(wechatRefundWatchTick)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s.mu.Lock()
		ended := s.wechatRefundsEnded(s.clock.Now())
		done := len(s.wechat.settling) == 0
		if done {
			s.wechat.watchingRefund = false
		}
		s.mu.Unlock()
		s.enqueueAll(ended)
		if done {
			return
		}
	}
}

func (s *Simulator) enqueueAll(notes []outgoingNotification) {
	for _, n := range notes {
		s.notifier.enqueue(n)
	}
}

// The summaries of refund notifications by final status.
var wechatRefundSummary = map[string]string{
	WechatRefundSuccess:  "退款成功",
	WechatRefundAbnormal: "退款异常",
	WechatRefundClosed:   "退款关闭",
}

// wechatRefundNotice is the resource of a refund notification (退款结果通知).
type wechatRefundNotice struct {
	MchID               string `json:"mchid"`
	TransactionID       string `json:"transaction_id"`
	OutTradeNo          string `json:"out_trade_no"`
	RefundID            string `json:"refund_id"`
	OutRefundNo         string `json:"out_refund_no"`
	RefundStatus        string `json:"refund_status"`
	SuccessTime         string `json:"success_time,omitempty"`
	UserReceivedAccount string `json:"user_received_account"`
	Amount              struct {
		Total       int64 `json:"total"`
		Refund      int64 `json:"refund"`
		PayerTotal  int64 `json:"payer_total"`
		PayerRefund int64 `json:"payer_refund"`
	} `json:"amount"`
}

// wechatRefundNotification is the REFUND.SUCCESS, REFUND.ABNORMAL or REFUND.CLOSED
// notification of a refund that has ended (§B4, §E): original_type "refund", encrypted and
// signed like a payment's, sent to the refund's notify_url. The caller holds s.mu.
func (s *Simulator) wechatRefundNotification(r *wechatRefund, now time.Time) outgoingNotification {
	o := r.order
	status := r.status(now)
	var n wechatRefundNotice
	n.MchID, n.TransactionID, n.OutTradeNo = s.keys.Wechat.MchID, o.transactionID, o.outTradeNo
	n.RefundID, n.OutRefundNo, n.RefundStatus = r.refundID, r.outRefundNo, status
	n.UserReceivedAccount = wechatUserReceivedAccount
	n.Amount.Total, n.Amount.Refund, n.Amount.PayerTotal, n.Amount.PayerRefund = o.prepay.total, r.amount, o.prepay.total, r.amount
	if status == WechatRefundSuccess {
		n.SuccessTime = wechatTime(r.settlesAt)
	}
	return s.wechatOutgoing(wechatEvent{
		outTradeNo:   o.outTradeNo,
		outRefundNo:  r.outRefundNo,
		id:           r.notifyID,
		url:          r.notifyURL,
		createTime:   r.settlesAt,
		eventType:    "REFUND." + status,
		summary:      wechatRefundSummary[status],
		originalType: "refund",
		resource: func(variant string) any {
			v := n // a copy: variants change only their own attempt
			switch variant {
			case FaultTamperAmount:
				v.Amount.Refund = tamperedAmount(v.Amount.Refund)
				v.Amount.PayerRefund = v.Amount.Refund
			case FaultWrongApp:
				v.MchID = wechatForeignMchID
			}
			return v
		},
	})
}

// wechatRefundQuery serves GET /v3/refund/domestic/refunds/{out_refund_no}: the Refund, or
// 404 RESOURCE_NOT_EXISTS.
func (s *Simulator) wechatRefundQuery(r *http.Request, _ []byte) wechatAnswer {
	now := s.clock.Now()
	s.mu.Lock()
	refund := s.wechat.refunds[r.PathValue("out_refund_no")]
	ans := wechatError(http.StatusNotFound, "RESOURCE_NOT_EXISTS", "退款单不存在")
	if refund != nil {
		ans = wechatJSON(http.StatusOK, wechatRefundView(refund, now))
	}
	// A refund a query shows ended has its notification on the way, without waiting for
	// the watcher's next look.
	ended := s.wechatRefundsEnded(now)
	s.mu.Unlock()
	s.enqueueAll(ended)
	return ans
}

// wechatFabricateRefund is the success a forger sends for a refund that never reached
// WeChat: SUCCESS for what was asked, under a refund_id WeChat never issued.
func (s *Simulator) wechatFabricateRefund(_ *http.Request, body []byte) wechatAnswer {
	req, fail := parseWechatRefund(body)
	if fail != nil {
		return wechatError(http.StatusInternalServerError, "SYSTEM_ERROR", "系统错误")
	}
	now := s.clock.Now()
	o := &wechatOrder{outTradeNo: req.outTradeNo, transactionID: req.transactionID, prepay: wechatPrepay{total: req.total}}
	return wechatJSON(http.StatusOK, wechatRefundView(&wechatRefund{
		outRefundNo: req.outRefundNo,
		refundID:    "50" + wechatDigits(27),
		order:       o,
		amount:      req.refund,
		createdAt:   now,
		settlesAt:   now,
	}, now))
}

// wechatRefundJSON is the Refund object ([WG] refunddomestic/models.go Refund).
type wechatRefundJSON struct {
	RefundID            string             `json:"refund_id"`
	OutRefundNo         string             `json:"out_refund_no"`
	TransactionID       string             `json:"transaction_id"`
	OutTradeNo          string             `json:"out_trade_no"`
	Channel             string             `json:"channel"`
	UserReceivedAccount string             `json:"user_received_account"`
	SuccessTime         string             `json:"success_time,omitempty"`
	CreateTime          string             `json:"create_time"`
	Status              string             `json:"status"`
	FundsAccount        string             `json:"funds_account"`
	Amount              wechatRefundAmount `json:"amount"`
}

type wechatRefundAmount struct {
	Total            int64  `json:"total"`
	Refund           int64  `json:"refund"`
	PayerTotal       int64  `json:"payer_total"`
	PayerRefund      int64  `json:"payer_refund"`
	SettlementRefund int64  `json:"settlement_refund"`
	SettlementTotal  int64  `json:"settlement_total"`
	DiscountRefund   int64  `json:"discount_refund"`
	Currency         string `json:"currency"`
}

// wechatRefundView renders r at now. The caller holds s.mu.
func wechatRefundView(r *wechatRefund, now time.Time) wechatRefundJSON {
	o := r.order
	v := wechatRefundJSON{
		RefundID:            r.refundID,
		OutRefundNo:         r.outRefundNo,
		TransactionID:       o.transactionID,
		OutTradeNo:          o.outTradeNo,
		Channel:             "ORIGINAL",
		UserReceivedAccount: wechatUserReceivedAccount,
		CreateTime:          wechatTime(r.createdAt),
		Status:              r.status(now),
		FundsAccount:        "AVAILABLE",
		Amount: wechatRefundAmount{
			Total:            o.prepay.total,
			Refund:           r.amount,
			PayerTotal:       o.prepay.total,
			PayerRefund:      r.amount,
			SettlementRefund: r.amount,
			SettlementTotal:  o.prepay.total,
			Currency:         "CNY",
		},
	}
	if v.Status == WechatRefundSuccess {
		v.SuccessTime = wechatTime(r.settlesAt)
	}
	return v
}
