package apppay

import (
	"context"
	"slices"
	"strings"
	"time"

	"orderpay"
)

// The counter (docs/barcode.md): a till is an app of the payments API. It takes a payment
// with the buyer's payment code, for a walk-in sale (an amount: an app payment of its own,
// as POST /v1/payments makes, but paid by the code) or for one of the shop's orders (which
// becomes PAID like any other). Every request carries an Idempotency-Key: a till that
// retries after a network error gets the same payment, never a second one.

// Bounds of a till's request.
const (
	MaxPosKeyLen      = 60 // the Idempotency-Key: "pos-" and it make the walk-in sale's merchant_order_no
	MaxDescriptionLen = 128
	PosListDefault    = 20
	PosListMax        = 100
	// walkInDeadline is a walk-in sale's app payment's deadline: past the longest wait and
	// the safety net's first tries, so that its close at the deadline finds the barcode
	// trade ended; the sale is settled as soon as its payment ends in any case.
	walkInDeadline       = 5 * time.Minute
	defaultWalkInSubject = "Counter sale"
)

// PosOrders is the order system's part: paying one of the shop's orders by code.
type PosOrders interface {
	PayBarcode(ctx context.Context, orderNo string, req orderpay.BarcodeRequest) (*orderpay.BarcodeResult, error)
}

// PosRequest is a till's payment: the buyer's code, and an Amount (a walk-in sale) or an
// OrderNo (one of the shop's orders; an amount given with it must be the order's), where it
// is taken (StoreID, TillID) and what for (Description, a walk-in sale's subject).
type PosRequest struct {
	AuthCode       string
	Amount         int64
	OrderNo        string
	StoreID        string
	TillID         string
	Description    string
	IdempotencyKey string
	ClientIP       string // the till's address (WeChat's scene_info.device_ip)
}

// PosView is a till payment as the till sees it.
type PosView struct {
	orderpay.BarcodeResult
	// Message is what the till shows, in English and Chinese.
	Message [2]string
}

func (s *Service) barcode() (orderpay.BarcodePayments, error) {
	bp, ok := s.cfg.Payments.(orderpay.BarcodePayments)
	if !ok {
		return nil, orderpay.Errorf(orderpay.EINTERNAL, "the payment center takes no barcode payments")
	}
	return bp, nil
}

func (s *Service) checkPos(app *orderpay.App, req *PosRequest) (string, error) {
	req.Description = strings.TrimSpace(req.Description)
	switch {
	case req.IdempotencyKey == "":
		return "", orderpay.Errorf(orderpay.EINVALID, "Idempotency-Key is required: a till that retries must never take a second payment")
	case !orderpay.ValidID(req.IdempotencyKey) || len(req.IdempotencyKey) > MaxPosKeyLen:
		return "", orderpay.Errorf(orderpay.EINVALID, "Idempotency-Key: 1 to %d letters, digits, _, - or .", MaxPosKeyLen)
	case req.Amount == 0 && req.OrderNo == "":
		return "", orderpay.Errorf(orderpay.EINVALID, "give amount (a walk-in sale) or order_no (one of the shop's orders)")
	case req.Amount < 0 || req.Amount > MaxAmount:
		return "", orderpay.Errorf(orderpay.EINVALID, "amount: a whole number of fen, 1 to %d", int64(MaxAmount))
	case req.OrderNo != "" && !orderpay.ValidID(req.OrderNo):
		return "", orderpay.Errorf(orderpay.EINVALID, "order_no: 1 to %d letters, digits, _, - or .", MaxNumberLen)
	case req.StoreID != "" && !orderpay.ValidID(req.StoreID), req.TillID != "" && !orderpay.ValidID(req.TillID):
		return "", orderpay.Errorf(orderpay.EINVALID, "store_id and till_id: 1 to %d letters, digits, _, - or .", MaxNumberLen)
	case len(req.Description) > MaxDescriptionLen:
		return "", orderpay.Errorf(orderpay.EINVALID, "description: at most %d bytes", MaxDescriptionLen)
	}
	channel, err := orderpay.BarcodeChannel(req.AuthCode)
	if err != nil {
		return "", err
	}
	if !slices.Contains(app.Channels, channel) {
		return "", orderpay.Errorf(orderpay.EINVALID, "auth_code: a %s code, and this app takes %s", channel, strings.Join(app.Channels, ", "))
	}
	return channel, nil
}

// PosPay takes a till's payment and answers within the till's wait: PAID, REFUSED (why, in
// a cashier's words), CANCELLED (the buyer did not confirm, and the trade is ended at the
// channel) or UNKNOWN (the payment center ends it in the background: poll PosPayment). A
// walk-in sale that is not paid is closed, so that nothing is left open.
func (s *Service) PosPay(ctx context.Context, app *orderpay.App, req PosRequest) (*PosView, error) {
	channel, err := s.checkPos(app, &req)
	if err != nil {
		return nil, err
	}
	bp, err := s.barcode()
	if err != nil {
		return nil, err
	}
	// The code is part of the request: the same key with another code is another request.
	hash := requestHash("pos", req.AuthCode, req.Amount, req.OrderNo, req.StoreID, req.TillID, req.Description)
	br := orderpay.BarcodeRequest{AuthCode: req.AuthCode, ClientIP: req.ClientIP, Amount: req.Amount,
		Till: orderpay.TillPayment{AppID: app.ID, IdempotencyKey: req.IdempotencyKey, RequestHash: hash, StoreID: req.StoreID,
			TillID: req.TillID, Description: req.Description}}
	var res *orderpay.BarcodeResult
	var ap *orderpay.AppPayment
	if req.OrderNo != "" {
		if s.cfg.Orders == nil {
			return nil, orderpay.Errorf(orderpay.EINVALID, "order_no: this server pays no shop orders at the till")
		}
		res, err = s.cfg.Orders.PayBarcode(ctx, req.OrderNo, br)
	} else {
		subject := req.Description
		if subject == "" {
			subject = defaultWalkInSubject
		}
		cr := CreatePaymentRequest{MerchantOrderNo: "pos-" + req.IdempotencyKey, Amount: req.Amount, Subject: subject,
			Channel: channel, IdempotencyKey: req.IdempotencyKey}
		now := orderpay.Now(s.cfg.Clock)
		var replayed bool
		ap, replayed, err = s.storePayment(ctx, app, cr, now.Add(walkInDeadline).Truncate(time.Second), hash)
		if err != nil {
			return nil, err
		}
		if replayed && ap.Status == orderpay.AppPaymentOpen && !now.Before(ap.ExpiresAt) {
			return nil, orderpay.Errorf(orderpay.ECONFLICT, "payment %s passed its deadline", ap.PaymentNo)
		}
		br.OrderNo, br.Subject, br.Deadline = ap.OrderKey, ap.Subject, ap.ExpiresAt
		br.Till.AppPaymentNo = ap.PaymentNo
		res, err = bp.PayBarcode(ctx, br)
	}
	if err != nil {
		return nil, err
	}
	if ap != nil {
		s.settleWalkIn(ctx, ap, res, app)
	}
	return posView(res), nil
}

// settleWalkIn brings a walk-in sale's app payment to its end with its barcode payment:
// paid, it is applied (pulled, if its push has not come); refused or cancelled, it is
// closed. A close that cannot finish now is left to the deadline's.
func (s *Service) settleWalkIn(ctx context.Context, ap *orderpay.AppPayment, res *orderpay.BarcodeResult, app *orderpay.App) {
	switch res.Status {
	case orderpay.BarcodePaid:
		if err := s.pull(ctx, ap); err != nil {
			s.log.Warn("walk-in sale paid; its app payment will learn it from the event", "payment_no", ap.PaymentNo, "err", err)
		}
	case orderpay.BarcodeRefused, orderpay.BarcodeCancelled:
		cur, err := s.cfg.Store.AppPayment(ctx, ap.PaymentNo)
		if err == nil {
			err = s.close(ctx, cur, "closed", "till:"+app.ID)
		}
		if err != nil {
			s.log.Info("walk-in sale not paid; its app payment closes at its deadline", "payment_no", ap.PaymentNo, "err", err)
		}
	}
}

// SettleTill settles the walk-in sale of the till payment outTradeNo, if it has one still
// OPEN, with its barcode payment's end: the payment center calls it when its safety net
// ends a barcode attempt, so that a sale whose till never asked again does not wait for
// its deadline. Errors are logged: the deadline's close is the net under it.
func (s *Service) SettleTill(ctx context.Context, outTradeNo string) {
	ts, ok := s.cfg.Store.(orderpay.TillStore)
	if !ok {
		return
	}
	t, err := ts.TillPayment(ctx, outTradeNo)
	if err != nil || t.AppPaymentNo == "" {
		return
	}
	ap, err := s.cfg.Store.AppPayment(ctx, t.AppPaymentNo)
	if err != nil || ap.Status != orderpay.AppPaymentOpen {
		return
	}
	bp, err := s.barcode()
	if err != nil {
		return
	}
	res, err := bp.BarcodeStatus(ctx, outTradeNo)
	if err != nil {
		s.log.Warn("walk-in sale not settled; its deadline's close will", "payment_no", ap.PaymentNo, "err", err)
		return
	}
	s.settleWalkIn(ctx, ap, res, &orderpay.App{ID: t.AppID})
}

// PosPayment is one of the app's till payments as it now stands (its number is its
// attempt's, out_trade_no).
func (s *Service) PosPayment(ctx context.Context, app *orderpay.App, no string) (*PosView, error) {
	ts, ok := s.cfg.Store.(orderpay.TillStore)
	if !ok {
		return nil, orderpay.Errorf(orderpay.EINTERNAL, "the store keeps no till payments")
	}
	t, err := ts.TillPayment(ctx, no)
	if err != nil || t.AppID != app.ID {
		return nil, orderpay.NotFound("till payment", no)
	}
	bp, err := s.barcode()
	if err != nil {
		return nil, err
	}
	res, err := bp.BarcodeStatus(ctx, no)
	if err != nil {
		return nil, err
	}
	if t.AppPaymentNo != "" && res.Status != orderpay.BarcodeUnknown {
		if ap, err := s.cfg.Store.AppPayment(ctx, t.AppPaymentNo); err == nil && ap.Status == orderpay.AppPaymentOpen {
			s.settleWalkIn(ctx, ap, res, app)
		}
	}
	return posView(res), nil
}

// PosPayments lists the app's latest till payments (of one till, if tillID is not ""),
// newest first, as they now stand.
func (s *Service) PosPayments(ctx context.Context, app *orderpay.App, tillID string, n int) ([]PosView, error) {
	ts, ok := s.cfg.Store.(orderpay.TillStore)
	if !ok {
		return nil, orderpay.Errorf(orderpay.EINTERNAL, "the store keeps no till payments")
	}
	if tillID != "" && !orderpay.ValidID(tillID) {
		return nil, orderpay.Errorf(orderpay.EINVALID, "till_id: 1 to %d letters, digits, _, - or .", MaxNumberLen)
	}
	if n <= 0 {
		n = PosListDefault
	}
	list, err := ts.TillPayments(ctx, app.ID, tillID, min(n, PosListMax))
	if err != nil {
		return nil, err
	}
	bp, err := s.barcode()
	if err != nil {
		return nil, err
	}
	out := make([]PosView, 0, len(list))
	for _, t := range list {
		res, err := bp.BarcodeStatus(ctx, t.OutTradeNo)
		if err != nil {
			return nil, err
		}
		out = append(out, *posView(res))
	}
	return out, nil
}

// posView is res with the words a till shows.
func posView(res *orderpay.BarcodeResult) *PosView {
	v := &PosView{BarcodeResult: *res}
	switch res.Status {
	case orderpay.BarcodePaid:
		v.Message = [2]string{"Paid", "支付成功"}
	case orderpay.BarcodeRefused:
		v.Message = orderpay.CashierWords[res.Refusal]
	case orderpay.BarcodeCancelled:
		v.Message = [2]string{"Not paid: the payment was cancelled at the channel; nothing was taken", "未支付：交易已撤销，未扣款"}
	default:
		v.Message = [2]string{"Still waiting for the buyer: the result follows, do not scan again", "等待顾客确认中：结果稍后更新，请勿重复扫码"}
	}
	return v
}
