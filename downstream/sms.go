package downstream

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"orderpay"
)

// SMS templates, one per subject the log handles.
const (
	TemplateOrderCreated    = "order_created"
	TemplateOrderPaid       = "order_paid"
	TemplateOrderCancelled  = "order_cancelled"
	TemplateRefundSucceeded = "refund_succeeded"
)

// SMS logs the text message a buyer would get for an order's created, paid and cancelled
// events and its refunds; nothing is sent. It is idempotent per message: one row per
// (message id, template), so a redelivery adds nothing. (Message ids are deterministic, so
// a re-publish of the same event has the same id too.)
type SMS struct {
	Store Store
	// Orders finds a refund's buyer; without it a refund's text has no buyer_id.
	Orders OrderReader
	Clock  orderpay.Clock
	Logger *slog.Logger
	// Confirm, if set, checks a message against the records before a text is logged
	// (Examples).
	Confirm func(ctx context.Context, m orderpay.Message) error
}

// Handle is the natsbus handler: nil once the row is committed (or the message is none of
// its business), an error to have it redelivered.
func (s *SMS) Handle(ctx context.Context, m orderpay.Message) error {
	log := logger(s.Logger, "downstream-sms").With("subject", m.Subject, "msg_id", m.ID)
	e := SMSEntry{MsgID: messageKey(m), CreatedAt: now(s.Clock)}
	switch m.Subject {
	case orderpay.SubjectOrderCreated, orderpay.SubjectOrderPaid, orderpay.SubjectOrderCancelled:
		var ev orderpay.OrderEventPayload
		if err := json.Unmarshal(m.Payload, &ev); err != nil || ev.OrderNo == "" {
			log.Error("malformed order event dropped", "err", err)
			return nil
		}
		e.OrderNo, e.BuyerID = ev.OrderNo, ev.BuyerID
		switch m.Subject {
		case orderpay.SubjectOrderCreated:
			e.Template = TemplateOrderCreated
			e.Text = fmt.Sprintf("您的订单 %s 已提交，应付 ¥%s，请尽快支付", ev.OrderNo, orderpay.FormatYuan(ev.Payable))
		case orderpay.SubjectOrderPaid:
			e.Template = TemplateOrderPaid
			e.Text = fmt.Sprintf("您的订单 %s 已支付 ¥%s", ev.OrderNo, orderpay.FormatYuan(ev.Payable))
		default:
			e.Template = TemplateOrderCancelled
			e.Text = fmt.Sprintf("您的订单 %s 已取消", ev.OrderNo)
		}
	case orderpay.SubjectRefundSucceeded:
		var ev orderpay.RefundEventPayload
		if err := json.Unmarshal(m.Payload, &ev); err != nil || ev.OrderNo == "" {
			log.Error("malformed refund.succeeded dropped", "err", err)
			return nil
		}
		if orderpay.IsAppOrderKey(ev.OrderNo) {
			return nil // a business app's payment: the app tells its own customers
		}
		e.OrderNo, e.Template = ev.OrderNo, TemplateRefundSucceeded
		e.Text = fmt.Sprintf("您的订单 %s 退款 ¥%s 已原路退回", ev.OrderNo, orderpay.FormatYuan(ev.Amount))
		if s.Orders != nil {
			o, err := s.Orders.Order(ctx, ev.OrderNo)
			switch {
			case orderpay.ErrorCode(err) == orderpay.ENOTFOUND:
				log.Error("refund for an unknown order: logged without a buyer", "order_no", ev.OrderNo)
			case err != nil:
				return err
			default:
				e.BuyerID = o.BuyerID
			}
		}
	default:
		return nil
	}
	if ok, err := acts(ctx, s.Confirm, log, m); !ok {
		return err
	}
	applied, err := s.Store.LogSMS(ctx, e)
	if err != nil {
		return err
	}
	if applied {
		log.Info("sms logged", "order_no", e.OrderNo, "template", e.Template)
	}
	return nil
}
