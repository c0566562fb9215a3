package sim

import (
	"bytes"
	"crypto/rand"
	"net/http"
	"net/url"
	"strings"
	"time"

	"orderpay"
)

// alipayForeignAppID is another merchant's app, for FaultWrongApp.
const alipayForeignAppID = "2021000000000000"

// alipayRefundTimeLayout is gmt_refund's format: real refund notifications carry
// milliseconds ("2020-03-27 18:19:15.143"), unlike every other Alipay time.
const alipayRefundTimeLayout = "2006-01-02 15:04:05.000"

// alipayNotification prepares the TRADE_SUCCESS notification of a just-paid trade (§A5), or
// nil if precreate gave no notify_url. Only TRADE_SUCCESS notifies for face-to-face. The
// caller holds s.mu; the fields are copied because the notification outlives the lock.
func (s *Simulator) alipayNotification(t *alipayTrade) *outgoingNotification {
	total := orderpay.FormatYuan(t.amount)
	fields := s.alipayNotifyFields(t, AlipayTradeSuccess)
	for k, v := range map[string]string{
		"receipt_amount":   total,
		"buyer_pay_amount": total,
		"invoice_amount":   total,
		"point_amount":     "0.00",
		"fund_bill_list":   `[{"amount":"` + total + `","fundChannel":"ALIPAYACCOUNT"}]`,
	} {
		fields.Set(k, v)
	}
	return s.alipayNotify(t, fields, t.notifyID, "", time.Time{})
}

// alipayRefundNotification prepares the notification of refund r of trade t (docs/channels.md §E),
// or nil if the trade has no notify_url. It goes to the payment's notify_url once the refund
// settles, as a trade_status_sync with out_biz_no (the refund's out_request_no),
// refund_fee (the total refunded on the trade once r settles), gmt_refund, and the trade's
// status then: TRADE_SUCCESS while part of the amount remains, TRADE_CLOSED (with
// gmt_close) once refunded in full. The fields are those of real refund notifications:
// no receipt, invoice or fund details. The full refund that alipay.trade.cancel makes of a
// paid trade notifies the same way (unverified). The caller holds s.mu, and adds r to
// t.refunds first.
func (s *Simulator) alipayRefundNotification(t *alipayTrade, r *alipayRefund) *outgoingNotification {
	// The refunds accepted so far that settle no later than r have all settled when r
	// does. (One accepted after r that settles before it, when r is slow, is not counted:
	// the notification is prepared now.)
	var refunded int64
	for _, other := range t.refunds {
		if !other.settlesAt.After(r.settlesAt) {
			refunded += other.amount
		}
	}
	status := AlipayTradeSuccess
	if refunded >= t.amount {
		status = AlipayTradeClosed
	}
	fields := s.alipayNotifyFields(t, status)
	fields.Set("out_biz_no", r.outRequestNo)
	fields.Set("refund_fee", orderpay.FormatYuan(refunded))
	fields.Set("gmt_refund", r.settlesAt.In(cst).Format(alipayRefundTimeLayout))
	if status == AlipayTradeClosed {
		fields.Set("gmt_close", r.settlesAt.In(cst).Format(alipayTimeLayout))
	}
	if r.notifyID == "" {
		r.notifyID = strings.ToLower(rand.Text())
	}
	return s.alipayNotify(t, fields, r.notifyID, r.outRequestNo, r.settlesAt)
}

// alipayNotifyFields are the fields every notification of trade t carries, with its status.
// app_id is the app that made the trade (the merchant's main app, or its in-app app), and
// auth_app_id the app the trade was made through: the merchant's own app here, so equal to
// app_id, as in real notifications.
func (s *Simulator) alipayNotifyFields(t *alipayTrade, status string) url.Values {
	return url.Values{
		"notify_type":    {"trade_status_sync"},
		"app_id":         {t.appID},
		"auth_app_id":    {t.appID},
		"charset":        {"utf-8"},
		"version":        {"1.0"},
		"trade_no":       {t.tradeNo},
		"out_trade_no":   {t.outTradeNo},
		"buyer_id":       {t.buyerUserID},
		"buyer_logon_id": {t.buyerLogonID},
		"seller_id":      {s.keys.SellerID},
		"trade_status":   {status},
		"total_amount":   {orderpay.FormatYuan(t.amount)},
		"subject":        {t.subject},
		"gmt_create":     {t.createdAt.In(cst).Format(alipayTimeLayout)},
		"gmt_payment":    {t.paidAt.In(cst).Format(alipayTimeLayout)},
	}
}

// alipayTamperedFields are the trade amounts a FaultTamperAmount copy changes, where present.
var alipayTamperedFields = []string{"total_amount", "receipt_amount", "buyer_pay_amount", "invoice_amount"}

// alipayNotify is the delivery of one notification with fields, to t's notify_url, through
// the shared notifier and its faults, signed with the Alipay key of the app that made t.
// Every attempt is signed afresh because it carries its own notify_time; notify_id stays the
// same. The caller holds s.mu.
func (s *Simulator) alipayNotify(t *alipayTrade, fields url.Values, notifyID, outRefundNo string, notBefore time.Time) *outgoingNotification {
	if t.notifyURL == "" {
		s.log.Info("sim: alipay trade has no notify_url, no notification", "out_trade_no", t.outTradeNo, "out_refund_no", outRefundNo)
		return nil
	}
	fields.Set("notify_id", notifyID)
	app := s.tradeApp(t)
	key, amount := app.AlipayPrivateKey, t.amount
	forger := s.forgerKey
	certSN, certSNMode := "", s.cfg.AlipayNotifyCertSN
	if app.cert != nil {
		certSN = app.cert.alipayCertSN
	}
	n := &outgoingNotification{
		Channel:     orderpay.ChannelAlipay,
		OutTradeNo:  t.outTradeNo,
		OutRefundNo: outRefundNo,
		NotifyID:    notifyID,
		URL:         t.notifyURL,
		NotBefore:   notBefore,
		Schedule:    s.cfg.AlipayNotifySchedule,
		Build: func(now time.Time, variant string) ([]byte, http.Header, error) {
			v := make(url.Values, len(fields)+5)
			for k, vs := range fields {
				v[k] = vs
			}
			v.Set("notify_time", now.In(cst).Format(alipayTimeLayout))
			signWith := key
			switch variant {
			case FaultForgeSignature:
				signWith = forger()
			case FaultTamperAmount:
				other := orderpay.FormatYuan(tamperedAmount(amount))
				for _, f := range alipayTamperedFields {
					if v.Has(f) {
						v.Set(f, other)
					}
				}
			case FaultWrongApp:
				v.Set("app_id", alipayForeignAppID)
				v.Set("auth_app_id", alipayForeignAppID)
			}
			if certSN != "" && certSNMode == AlipayNotifyCertSNSigned {
				v.Set("alipay_cert_sn", certSN)
			}
			// Every value is non-empty: smartwalle's verifier keeps empty values in the
			// signed content while the official rule drops them, so an empty field would
			// make the two disagree.
			sig, err := SignAlipayParams(signWith, v)
			if err != nil {
				return nil, nil, err
			}
			if certSN != "" && certSNMode == AlipayNotifyCertSNUnsigned {
				v.Set("alipay_cert_sn", certSN)
			}
			v.Set("sign_type", "RSA2")
			v.Set("sign", sig)
			h := http.Header{"Content-Type": {"application/x-www-form-urlencoded; charset=utf-8"}}
			return []byte(v.Encode()), h, nil
		},
		Acked: func(status int, body []byte) bool {
			// Exactly the 7 bytes "success" with HTTP 200: anything else, even
			// "success\n", makes Alipay resend (§A5).
			return status == http.StatusOK && bytes.Equal(body, []byte("success"))
		},
	}
	s.noteDue(n)
	return n
}
