package orderpay

import (
	"context"
	"time"
)

// MethodBarcode: the buyer's payment code (付款码), scanned at a counter by a till (Alipay
// alipay.trade.pay with scene=bar_code; WeChat Pay's codepay). It is not one of the ways a
// buyer asks for (ChannelMethods): only a till takes it, with the code the buyer shows
// (docs/barcode.md). Its attempt goes through the same payment, attempts, PAYING lock,
// queries and refunds as every method; what differs is that the prepay call is the payment
// itself, that WeChat never notifies it, and that a trade not paid within the till's bound
// is ended at the channel (Reverser) rather than left to its deadline.
const MethodBarcode PayMethod = "barcode"

// Barcode timings (docs/barcode.md, "The loop"). The channels' own advice: query every 5 s;
// WeChat refuses a reverse sooner than 15 s after the order.
const (
	// BarcodeQueryEvery is how often an unknown barcode trade is queried.
	BarcodeQueryEvery = 5 * time.Second
	// BarcodeBoundDefault is how long a till waits for the buyer before the trade is
	// cancelled or reversed; BarcodeBoundMin and BarcodeBoundMax bound the setting.
	BarcodeBoundDefault = 35 * time.Second
	BarcodeBoundMin     = 20 * time.Second
	BarcodeBoundMax     = 120 * time.Second
	// WechatReverseAfter is how soon after the order WeChat Pay accepts a reverse.
	WechatReverseAfter = 15 * time.Second
)

// BarcodeChannel is the channel a scanned payment code belongs to, by its length and first
// two digits: WeChat Pay 18 digits starting 10 to 15; Alipay 16 to 24 digits starting 25
// to 30. Anything else (a UnionPay code, a typo, letters) is EINVALID: it is refused before
// anything is written or sent.
func BarcodeChannel(code string) (string, error) {
	n := len(code)
	if n < 16 || n > 24 {
		return "", Errorf(EINVALID, "auth_code: a payment code has 16 to 24 digits (WeChat Pay 18, starting 10 to 15; Alipay 16 to 24, starting 25 to 30)")
	}
	for i := 0; i < n; i++ {
		if code[i] < '0' || code[i] > '9' {
			return "", Errorf(EINVALID, "auth_code: a payment code has digits only")
		}
	}
	prefix := int(code[0]-'0')*10 + int(code[1]-'0')
	switch {
	case n == 18 && prefix >= 10 && prefix <= 15:
		return ChannelWechat, nil
	case prefix >= 25 && prefix <= 30:
		return ChannelAlipay, nil
	}
	return "", Errorf(EINVALID, "auth_code: not a WeChat Pay code (18 digits starting 10 to 15) nor an Alipay one (16 to 24 digits starting 25 to 30)")
}

// BarcodeRefusal is why a channel refused a barcode payment, in a class a cashier can act
// on. PrecreateResult.Refusal carries it with a Rejected barcode answer.
type BarcodeRefusal string

const (
	RefusalBalance     BarcodeRefusal = "BALANCE"      // not enough money or over a limit: another card, or another way
	RefusalPassword    BarcodeRefusal = "PASSWORD"     // the buyer's password was wrong and the payment failed
	RefusalCodeExpired BarcodeRefusal = "CODE_EXPIRED" // the code is too old: the buyer refreshes it
	RefusalCodeUsed    BarcodeRefusal = "CODE_USED"    // the code was already used: the buyer refreshes it
	RefusalCodeInvalid BarcodeRefusal = "CODE_INVALID" // not a code the channel knows (misread): scan again
	RefusalRisk        BarcodeRefusal = "RISK"         // the channel's risk control or the buyer's account refused
	RefusalOther       BarcodeRefusal = "OTHER"        // any other definite refusal: the channel's words say why
)

// CashierWords are the words a till shows for each refusal, English and Chinese.
var CashierWords = map[BarcodeRefusal][2]string{
	RefusalBalance:     {"Not enough balance: ask the buyer to choose another card or pay another way", "余额不足：请顾客更换付款方式"},
	RefusalPassword:    {"Wrong password: the payment failed, ask the buyer to try again", "密码错误，支付失败：请顾客重试"},
	RefusalCodeExpired: {"The code has expired: ask the buyer to refresh it", "付款码已过期：请顾客刷新付款码"},
	RefusalCodeUsed:    {"The code was already used: ask the buyer to refresh it", "付款码已使用：请顾客刷新付款码"},
	RefusalCodeInvalid: {"Not a valid payment code: scan again", "付款码无效：请重新扫码"},
	RefusalRisk:        {"Refused by the wallet's risk control: ask the buyer to pay another way", "支付被风控拒绝：请顾客更换付款方式"},
	RefusalOther:       {"The payment was refused", "支付被拒绝"},
}

// Reverser is a channel adapter that takes barcode payments and can end one whose buyer did
// not confirm in time: Alipay's alipay.trade.cancel, WeChat Pay's codepay reverse. A
// reverse ends the trade whatever its state: an unpaid trade is closed and its code dead; a
// paid one is refunded in full.
type Reverser interface {
	Reverse(ctx context.Context, req ReverseRequest) ReverseResult
}

// ReverseRequest names the barcode trade to end.
type ReverseRequest struct {
	OutTradeNo string
	// OrderedAt is when the trade was ordered (the attempt's submission): WeChat refuses a
	// reverse sooner than WechatReverseAfter after it, which an adapter may check before
	// sending (then it answers OutcomeRefundRetry without a call).
	OrderedAt time.Time
}

// ReverseResult is a reverse's answer:
//   - OutcomeClosed: the trade is ended at the channel and holds no money. Refunded says
//     the channel said it was paid and the money went back (Alipay action=refund);
//     RefundKnown says whether the answer tells at all (WeChat's reverse answer does not:
//     only a query before it does);
//   - OutcomeRefundRetry: refused for now (WeChat while the buyer is paying, or sooner than
//     15 s; Alipay retry_flag=Y): send it again later under the same number;
//   - OutcomeRejected: refused for good (the trade is too old, or already refunded or
//     settled): a person must look;
//   - OutcomeUnknown: no definite answer: send it again, never taken as done.
type ReverseResult struct {
	Outcome     Outcome
	Refunded    bool
	RefundKnown bool
	Detail      string
	Raw         string
}

// BarcodeStatus is what a till is told of a barcode payment.
type BarcodeStatus string

const (
	// BarcodePaid: the channel's verified word is that the buyer paid, and it is recorded
	// (the order, or the walk-in sale, is paid).
	BarcodePaid BarcodeStatus = "PAID"
	// BarcodeRefused: the channel refused the payment (Refusal says why); nothing was paid.
	BarcodeRefused BarcodeStatus = "REFUSED"
	// BarcodeCancelled: the buyer did not confirm in time, or left, and the trade is ended
	// at the channel (cancelled, reversed, or ended unpaid): no money is held; a payment
	// that came in the meantime went back.
	BarcodeCancelled BarcodeStatus = "CANCELLED"
	// BarcodeUnknown: no end yet within the till's bound. The payment center ends it in the
	// background (paid and recorded, or cancelled or reversed); the till asks again.
	BarcodeUnknown BarcodeStatus = "UNKNOWN"
)

// BarcodeRequest is a till's payment of OrderNo (a shop order, or a walk-in sale's app
// payment key) with the buyer's code: the channel is the code's (BarcodeChannel). Till is
// what the payment center records with the attempt, in the transaction that creates it
// (before the channel hears of it): who asked, with which Idempotency-Key, at which
// counter. Wait bounds how long the request waits for the buyer before the trade is ended
// at the channel (BarcodeBoundDefault).
type BarcodeRequest struct {
	OrderNo  string
	Amount   int64
	Subject  string
	Deadline time.Time
	AuthCode string
	ClientIP string
	Till     TillPayment
	Wait     time.Duration
}

// BarcodeResult is a barcode payment as it stands: its attempt, and what a till is told.
type BarcodeResult struct {
	Till    TillPayment
	Status  BarcodeStatus
	Refusal BarcodeRefusal
	Detail  string
	TradeNo string
	PaidAt  time.Time
	// Replayed: the request's Idempotency-Key had made this payment already.
	Replayed bool
}

// TillPayment is one barcode payment a till asked for (POST /v1/pos/payments): the attempt
// it made (OutTradeNo, of PaymentNo), who asked (AppID and the request's Idempotency-Key,
// unique per app, and the request's hash), where (StoreID, TillID), what for (OrderNo: a
// shop order, or "" for a walk-in sale, whose app payment is AppPaymentNo), the code's last
// four digits (the code itself is never stored), and the first final answer the till was
// given (Answer, "" until then; Refusal and Detail with it).
type TillPayment struct {
	OutTradeNo     string
	PaymentNo      string
	AppID          string
	IdempotencyKey string
	RequestHash    string
	Channel        string
	Amount         int64
	OrderNo        string
	AppPaymentNo   string
	StoreID        string
	TillID         string
	Description    string
	CodeTail       string
	Answer         BarcodeStatus
	Refusal        BarcodeRefusal
	Detail         string
	CreatedAt      time.Time
	AnsweredAt     time.Time
	// ReverseSentAt is when a reverse of the trade was last on its way with no definite
	// refusal since (zero: none). Such a reverse may have refunded a payment, and Alipay's
	// query of a cancelled paid trade still shows the payment: while it is set, a query's
	// "paid" is not believed, and the reverse is sent again to say which it was.
	ReverseSentAt time.Time
}

// TillReader reads till payments; ENOTFOUND for a missing one.
type TillReader interface {
	TillPayment(ctx context.Context, outTradeNo string) (*TillPayment, error)
	TillPaymentByKey(ctx context.Context, appID, idempotencyKey string) (*TillPayment, error)
	// TillPayments lists an app's latest till payments, newest first, of one till if
	// tillID is not "": at most n.
	TillPayments(ctx context.Context, appID, tillID string, n int) ([]TillPayment, error)
}

// TillTx is a transaction with the till payments in reach.
type TillTx interface {
	Tx
	TillReader
	// CreateTillPayment inserts t; ECONFLICT if its number, or its app's key, is taken.
	CreateTillPayment(ctx context.Context, t *TillPayment) error
	// AnswerTillPayment records the first final answer given to the till (PAID, REFUSED or
	// CANCELLED), only if none is recorded yet; ECONFLICT otherwise.
	AnswerTillPayment(ctx context.Context, outTradeNo string, answer BarcodeStatus, refusal BarcodeRefusal, detail string, at time.Time) error
	// MarkTillReverse records that a reverse is on its way (sent: ReverseSentAt = at), or
	// that the channel refused it definitely (not sent: cleared). ENOTFOUND if no such row.
	// A mark is made only while the attempt is PAYING, taking its row (ECONFLICT otherwise):
	// a payment applied at the same time either commits first, and there is no mark, or
	// finds the mark in its own transaction and is not applied.
	MarkTillReverse(ctx context.Context, outTradeNo string, sent bool, at time.Time) error
}

// TillStore is a Store with the till payments.
type TillStore interface {
	Store
	TillReader
	InTillTx(ctx context.Context, fn func(tx TillTx) error) error
}

// BarcodePayments is the payment center's barcode side (*payment.Service is one).
type BarcodePayments interface {
	// PayBarcode takes the payment and waits for its end, at most the till's wait.
	PayBarcode(ctx context.Context, req BarcodeRequest) (*BarcodeResult, error)
	// BarcodeStatus is the till payment of an attempt as it now stands.
	BarcodeStatus(ctx context.Context, outTradeNo string) (*BarcodeResult, error)
}
