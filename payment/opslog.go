package payment

import (
	"context"
	"net/http"
	"time"

	"orderpay"
)

// notifySeen is what handleNotification learnt about a notification, for the log.
type notifySeen struct {
	verified   bool
	outTradeNo string
	ignored    string // the outcome of a verified notification that is not a payment
}

// opsLogTimeout bounds a log write, which must not hold up the answer to a channel.
const opsLogTimeout = 2 * time.Second

// HandleNotification verifies and applies a channel notification (handleNotification), and
// records it in the store's notification log, if it keeps one, whatever came of it: the
// operator sees forged and mismatched notifications as well as the genuine ones. Only
// notifications to a configured channel are logged, so that requests to made-up channel
// names cannot fill the log.
func (s *Service) HandleNotification(ctx context.Context, channel string, header http.Header, body []byte) (orderpay.NotifyReply, error) {
	var seen notifySeen
	reply, err := s.handleNotification(ctx, channel, header, body, &seen)
	ch, known := s.cfg.Channels[channel]
	logger, ok := s.cfg.Store.(orderpay.OpsLog)
	if !known || !ok {
		return reply, err
	}
	e := orderpay.NotificationLogEntry{ReceivedAt: orderpay.Now(s.cfg.Clock), Channel: channel, OutTradeNo: seen.outTradeNo,
		Verified: seen.verified, Raw: string(body)}
	if e.OutTradeNo == "" {
		// Unverified: what it claims, which is all the operator can search it by.
		e.OutTradeNo = ch.NotificationTrade(header, body)
	}
	switch code := orderpay.ErrorCode(err); {
	case err == nil && seen.ignored != "":
		e.Result, e.Detail = orderpay.NotifyIgnored, "trade state "+seen.ignored
	case err == nil:
		e.Result = orderpay.NotifyApplied
	case seen.verified && (code == orderpay.EINTERNAL || code == orderpay.EUNAVAILABLE):
		e.Result, e.Detail = orderpay.NotifyFailed, code+": "+orderpay.ErrorMessage(err)
	default:
		e.Result, e.Detail = orderpay.NotifyRejected, code+": "+orderpay.ErrorMessage(err)
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opsLogTimeout)
	defer cancel()
	if lerr := logger.LogNotification(lctx, &e); lerr != nil {
		s.log.Warn("notification log write failed", "channel", channel, "err", lerr)
	}
	return reply, err
}

// logQuery records one query of a channel in the store's query log, if it keeps one.
func (s *Service) logQuery(ctx context.Context, co *orderpay.ChannelOrder, trigger string, q orderpay.QueryResult) {
	logger, ok := s.cfg.Store.(orderpay.OpsLog)
	if !ok {
		return
	}
	detail := q.Detail
	if len(detail) > 500 {
		detail = detail[:500]
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opsLogTimeout)
	defer cancel()
	e := orderpay.QueryLogEntry{At: orderpay.Now(s.cfg.Clock), Channel: co.Channel, OutTradeNo: co.OutTradeNo, Trigger: trigger,
		Outcome: q.Outcome, Detail: detail}
	if err := logger.LogQuery(lctx, &e); err != nil {
		s.log.Warn("query log write failed", "out_trade_no", co.OutTradeNo, "err", err)
	}
}
