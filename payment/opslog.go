package payment

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"orderpay"

	"golang.org/x/time/rate"
)

// notifySeen is what handleNotification learnt about a notification, for the log.
type notifySeen struct {
	verified   bool
	outTradeNo string
	ignored    string // the outcome of a verified notification that is not a payment
	duplicate  bool   // verified, and it changed nothing: a replay, or news already known
	logged     bool   // its log entry was written in the transaction that applied it
}

// opsLogTimeout bounds a log write, which must not hold up the answer to a channel.
const opsLogTimeout = 2 * time.Second

// HandleNotification verifies and applies a channel notification (handleNotification) that
// came from the address from, and records it in the store's notification log, if it keeps
// one, whatever came of it: the operator sees forged and mismatched notifications as well as
// the genuine ones. Only notifications to a configured channel are logged, so that
// requests to made-up channel names cannot fill the log; every verified one is; one that
// failed verification is logged only within the log's rates per channel and per source
// address (UnverifiedLogRate), and otherwise counted, not stored, so that a flood of
// forgeries cannot fill the database. Bodies that are not valid UTF-8 or hold a NUL are
// logged escaped, not dropped.
func (s *Service) HandleNotification(ctx context.Context, channel, from string, header http.Header, body []byte) (orderpay.NotifyReply, error) {
	var seen notifySeen
	reply, err := s.handleNotification(ctx, channel, header, body, &seen)
	ch, known := s.cfg.Channels[channel]
	logger, ok := s.cfg.Store.(orderpay.OpsLog)
	if !known || !ok || (err == nil && seen.logged) {
		return reply, err
	}
	if !seen.verified && !s.unverifiedLog.allow(channel, from) {
		s.cfg.Observer.NotificationUnlogged(channel)
		return reply, err
	}
	e := s.logEntry(channel, seen.outTradeNo, seen.verified, body)
	if e.OutTradeNo == "" {
		// Unverified: what it claims, which is all the operator can search it by.
		e.OutTradeNo = storable(ch.NotificationTrade(header, body))
	}
	switch code := orderpay.ErrorCode(err); {
	case err == nil && seen.ignored != "":
		e.Result, e.Detail = orderpay.NotifyIgnored, "trade state "+seen.ignored
	case err == nil:
		e.Settle(!seen.duplicate)
	case seen.verified && (code == orderpay.EINTERNAL || code == orderpay.EUNAVAILABLE):
		e.Result, e.Detail = orderpay.NotifyFailed, code+": "+orderpay.ErrorMessage(err)
	default:
		e.Result, e.Detail = orderpay.NotifyRejected, code+": "+orderpay.ErrorMessage(err)
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opsLogTimeout)
	defer cancel()
	if lerr := logger.LogNotification(lctx, e); lerr != nil {
		s.log.Warn("notification log write failed", "channel", channel, "err", lerr)
	}
	return reply, err
}

// appliedLogEntry is the log entry of a verified notification about outTradeNo whose result
// is settled in the transaction that applies it (Settle), or nil if the store keeps no log.
func (s *Service) appliedLogEntry(channel, outTradeNo string, body []byte) *orderpay.NotificationLogEntry {
	if _, ok := s.cfg.Store.(orderpay.OpsLog); !ok {
		return nil
	}
	return s.logEntry(channel, outTradeNo, true, body)
}

// logEntry is a notification's log entry, received now, before its result is known.
func (s *Service) logEntry(channel, outTradeNo string, verified bool, body []byte) *orderpay.NotificationLogEntry {
	return &orderpay.NotificationLogEntry{ReceivedAt: orderpay.Now(s.cfg.Clock), Channel: channel, OutTradeNo: outTradeNo,
		Verified: verified, Raw: storable(string(body))}
}

// storable is s as the database can hold it: itself if it is valid UTF-8 without NUL
// (PostgreSQL's text takes neither), else quoted with Go's escapes, so that nothing the
// channel sent is dropped and nothing breaks the write.
func storable(s string) string {
	if utf8.ValidString(s) && !strings.ContainsRune(s, 0) {
		return s
	}
	return "escaped:" + strconv.QuoteToASCII(s)
}

// logRate bounds the log of notifications that failed verification: per channel, and per
// source address, token buckets of a minute's worth.
type logRate struct {
	perChannel, perSource int // a minute's worth
	mu                    sync.Mutex
	buckets               map[string]*rate.Limiter
}

func (l *logRate) allow(channel, from string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buckets == nil || len(l.buckets) > 10_000 {
		// A fresh start forgets what each source spent: it costs at most one more minute's
		// worth per source, and the map cannot grow with the sources of a flood.
		l.buckets = map[string]*rate.Limiter{}
	}
	bucket := func(key string, perMinute int) *rate.Limiter {
		b := l.buckets[key]
		if b == nil {
			b = rate.NewLimiter(rate.Limit(float64(perMinute)/60), perMinute)
			l.buckets[key] = b
		}
		return b
	}
	src := bucket("source:"+from, l.perSource)
	if !src.Allow() {
		return false
	}
	return bucket("channel:"+channel, l.perChannel).Allow()
}

// logQuery records one query of a channel in the store's query log, if it keeps one. A
// query that learnt nothing new (the same outcome as the attempt's last logged query, less
// than queryLogRepeat ago) is not logged again: a payment watched by a page is queried every
// second, and the log would grow by a row a second for nothing an operator can use.
func (s *Service) logQuery(ctx context.Context, co *orderpay.ChannelOrder, trigger string, q orderpay.QueryResult) {
	logger, ok := s.cfg.Store.(orderpay.OpsLog)
	if !ok || !s.queryLog.fresh(co.OutTradeNo, q.Outcome, orderpay.Now(s.cfg.Clock)) {
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

// queryLogRepeat is how long a query with the outcome of its attempt's last logged one is
// not logged again.
const queryLogRepeat = time.Minute

// lastQueries remembers each attempt's last logged query outcome (queryLogRepeat).
type lastQueries struct {
	mu   sync.Mutex
	last map[string]loggedQuery
}

type loggedQuery struct {
	outcome orderpay.Outcome
	at      time.Time
}

// fresh reports whether a query of outTradeNo with outcome, at now, is news to log, and
// remembers it if so.
func (l *lastQueries) fresh(outTradeNo string, outcome orderpay.Outcome, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p, ok := l.last[outTradeNo]; ok && p.outcome == outcome && now.Sub(p.at) < queryLogRepeat {
		return false
	}
	if l.last == nil || len(l.last) > 100_000 {
		l.last = map[string]loggedQuery{} // forgetting costs at most one more row per attempt
	}
	l.last[outTradeNo] = loggedQuery{outcome: outcome, at: now}
	return true
}
