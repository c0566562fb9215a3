// Package payment is the payment center: payment orders, their channel attempts, channel
// notifications, and the announcement of results to the order system. It knows nothing of
// stock or shipping.
package payment

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"orderpay"

	"golang.org/x/sync/singleflight"
)

// Defaults.
const (
	// ResultCallTimeoutDefault bounds the direct call that tells the order system a payment
	// succeeded. If it fails, the payment.succeeded event still gets there through the bus.
	ResultCallTimeoutDefault  = 2 * time.Second
	ResultCallAttemptsDefault = 3
	DeadlineMarginDefault     = 5 * time.Second
	RefundRetryDefault        = 5 * time.Second
	RefundRetryMaxDefault     = 5 * time.Minute
)

// Config configures the Service. Zero fields take the documented defaults.
type Config struct {
	Store    orderpay.Store              // required
	Channels map[string]orderpay.Channel // required: by name
	// NotifyURL returns the URL a channel should post its notifications to. Required.
	NotifyURL func(channel string) string
	// ReturnURL returns the page a wallet sends the buyer of an order back to (Alipay PC
	// and WAP's return_url and quit_url, WeChat H5's redirect_url). Optional: without it
	// those methods get no return address.
	ReturnURL func(orderNo string) string
	// Results is the order system's fast path. Optional: without it, results travel only
	// through the outbox and the bus.
	Results orderpay.PaymentResults
	// ResultCallTimeout defaults to ResultCallTimeoutDefault; ResultCallAttempts to
	// ResultCallAttemptsDefault.
	ResultCallTimeout  time.Duration
	ResultCallAttempts int
	// Clock defaults to the system clock.
	Clock orderpay.Clock
	// Fees are the merchant accounts' contracts, by channel. Optional: an attempt that
	// succeeds at a channel with a contract records the fee it expects to be charged, and a
	// refund the channel makes of it the share of that fee it expects back; at a channel
	// without one, neither is recorded (reconciliation cannot check its fees).
	Fees orderpay.FeeSchedule
	// OutboxWritten is called after a commit that wrote outbox messages (to wake the relay).
	OutboxWritten func()
	// RefundCreated is called after a commit that created a refund (to wake the refund
	// worker). Optional.
	RefundCreated func()
	// RefundFinal is called inside the transaction that brings a refund's money back (r as
	// it now stands: the channel made it, SUCCESS; an operator paid it outside the channel,
	// RESOLVED), so that
	// whoever asked for it (the order system's after-sales) moves in the same commit. A
	// refund the channel will not make never calls it: it is owed until one of those.
	// Optional.
	RefundFinal func(ctx context.Context, tx orderpay.Tx, r *orderpay.ChannelRefund, at time.Time) error
	// DeadlineMargin is how long after a payment's deadline a channel's "not paid" is final:
	// the deadline was passed to the channel at precreate, and this covers the two clocks
	// disagreeing. Defaults to 5 s.
	DeadlineMargin time.Duration
	// RefundRetry is the first wait before a refund whose answer was unknown or pending is
	// looked at again; it doubles up to RefundRetryMax. Defaults to 5 s and 5 minutes.
	RefundRetry    time.Duration
	RefundRetryMax time.Duration
	// RefundRetryPlan is when a refund the channel refused for now is sent again, and when
	// it goes before an operator instead. Defaults to orderpay.DefaultRefundRetryPlan.
	RefundRetryPlan orderpay.RefundRetryPlan
	// RefundClaim is how long a worker's claim of a refund holds before another worker may
	// take it (its channel call is cut off at half of it). Defaults to RefundClaimDefault.
	RefundClaim time.Duration

	// Timers carries the active queries' schedule (broker timers). Optional: without it
	// only the pending-query sweeper (QueryDue) runs them.
	Timers orderpay.Timers
	// QuerySchedule is when an attempt is queried, counted from its submission; then every
	// QueryEvery, until its deadline plus CloseGrace. Default QueryScheduleDefault (10 s,
	// 30 s, 1 m, 1 m 30 s, 2 m, 5 m, 7 m) and 10 minutes.
	QuerySchedule []time.Duration
	QueryEvery    time.Duration
	// CloseGrace is how long after a deadline the timeout close starts; queries stop being
	// scheduled then. Defaults to 30 s.
	CloseGrace time.Duration
	// UnknownRetry is how soon an attempt whose last call had no definite answer is queried
	// again. Defaults to 5 s.
	UnknownRetry time.Duration
	// MaxQueryAttempts bounds an attempt's queries; then it is flagged for reconciliation,
	// with an alert. Defaults to 60.
	MaxQueryAttempts int
	// SweepLag is how long past due a pending query waits for its timer before the sweeper
	// takes it. Defaults to 2 s (0 without Timers).
	SweepLag time.Duration
	// PollQueryInterval is the least time between two queries of one attempt triggered by
	// buyers watching its order or by unverifiable notifications naming it, together.
	// Defaults to PollQueryIntervalDefault.
	PollQueryInterval time.Duration
	// WatchQueriesPerBuyer bounds the channel queries one watcher (a buyer, whatever
	// number of orders they watch) triggers per WatchQueryWindow; past it, their reads
	// answer from the database. Defaults to WatchQueriesPerBuyerDefault (10) per
	// WatchQueryWindowDefault (10 s).
	WatchQueriesPerBuyer int
	WatchQueryWindow     time.Duration
	// PollGrace is how long after a watcher first found an attempt open it is first queried
	// for a watcher: a notification that was not lost has arrived by then. Defaults to
	// PollGraceDefault.
	PollGrace time.Duration
	// UnverifiedLogPerChannel and UnverifiedLogPerSource bound how many notifications that
	// failed verification the notification log stores a minute, per channel and per source
	// address; the rest are counted (Observer.NotificationUnlogged), not stored. Default
	// to UnverifiedLogPerChannelDefault (120) and UnverifiedLogPerSourceDefault (20).
	UnverifiedLogPerChannel, UnverifiedLogPerSource int
	// PassiveOnly makes no queries on its own: none when a buyer polls, none after an
	// unverifiable notification. The notify-only and scan strategies of the chaos harness's
	// comparison run so; the design's own defence does not.
	PassiveOnly bool
	// BarcodeEnded is told, after the commit, of a barcode attempt the safety net ended
	// (paid, or ended at the channel), so that whoever took it (a walk-in sale) can settle
	// at once rather than at its deadline. Optional.
	BarcodeEnded func(ctx context.Context, outTradeNo string)
	// BarcodeWait is how long a till's barcode payment waits for the buyer before its
	// trade is ended at the channel, within orderpay.BarcodeBoundMin and
	// orderpay.BarcodeBoundMax. Defaults to orderpay.BarcodeBoundDefault.
	BarcodeWait time.Duration
	// Go runs what the service starts in the background (the query of the trade an
	// unverifiable notification names). Defaults to a goroutine; the explorer runs it in
	// the operation that started it, so that it can stop it at its steps.
	Go func(fn func())
	// Observer hears notifications, queries and automatic refunds, for metrics and alerts.
	// Defaults to orderpay.NopObserver.
	Observer orderpay.Observer
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	c.Clock = cmp.Or[orderpay.Clock](c.Clock, orderpay.SystemClock{})
	c.ResultCallTimeout = cmp.Or(c.ResultCallTimeout, ResultCallTimeoutDefault)
	c.ResultCallAttempts = cmp.Or(c.ResultCallAttempts, ResultCallAttemptsDefault)
	if c.OutboxWritten == nil {
		c.OutboxWritten = func() {}
	}
	if c.RefundFinal == nil {
		c.RefundFinal = func(context.Context, orderpay.Tx, *orderpay.ChannelRefund, time.Time) error { return nil }
	}
	if c.RefundCreated == nil {
		c.RefundCreated = func() {}
	}
	c.DeadlineMargin = cmp.Or(c.DeadlineMargin, DeadlineMarginDefault)
	c.RefundRetry = cmp.Or(c.RefundRetry, RefundRetryDefault)
	c.RefundRetryMax = cmp.Or(c.RefundRetryMax, RefundRetryMaxDefault)
	c.RefundClaim = cmp.Or(c.RefundClaim, RefundClaimDefault)
	if c.RefundRetryPlan.Every == 0 {
		c.RefundRetryPlan = orderpay.DefaultRefundRetryPlan
	}
	if len(c.QuerySchedule) == 0 {
		c.QuerySchedule = QueryScheduleDefault
	}
	c.QueryEvery = cmp.Or(c.QueryEvery, QueryEveryDefault)
	c.CloseGrace = cmp.Or(c.CloseGrace, CloseGraceDefault)
	c.UnknownRetry = cmp.Or(c.UnknownRetry, UnknownRetryDefault)
	c.MaxQueryAttempts = cmp.Or(c.MaxQueryAttempts, MaxQueryAttemptsDefault)
	if c.SweepLag == 0 && c.Timers != nil {
		c.SweepLag = SweepLagDefault
	}
	c.PollQueryInterval = cmp.Or(c.PollQueryInterval, PollQueryIntervalDefault)
	c.PollGrace = cmp.Or(c.PollGrace, PollGraceDefault)
	c.WatchQueriesPerBuyer = cmp.Or(c.WatchQueriesPerBuyer, WatchQueriesPerBuyerDefault)
	c.WatchQueryWindow = cmp.Or(c.WatchQueryWindow, WatchQueryWindowDefault)
	c.UnverifiedLogPerChannel = cmp.Or(c.UnverifiedLogPerChannel, UnverifiedLogPerChannelDefault)
	c.UnverifiedLogPerSource = cmp.Or(c.UnverifiedLogPerSource, UnverifiedLogPerSourceDefault)
	c.BarcodeWait = cmp.Or(c.BarcodeWait, orderpay.BarcodeBoundDefault)
	if c.BarcodeEnded == nil {
		c.BarcodeEnded = func(context.Context, string) {}
	}
	if c.Go == nil {
		c.Go = func(fn func()) { go fn() }
	}
	c.Observer = cmp.Or[orderpay.Observer](c.Observer, orderpay.NopObserver{})
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// Defaults of the notification log's bound on notifications that failed verification: a
// minute's worth per channel, and per source address.
const (
	UnverifiedLogPerChannelDefault = 120
	UnverifiedLogPerSourceDefault  = 20
)

// Service runs the payment center's use cases.
type Service struct {
	cfg     Config
	log     *slog.Logger
	limiter pollLimiter
	polls   singleflight.Group // one round of watch queries per payment in flight (Poll)
	// watchers counts each watcher's queries in their current window (PollRead).
	watchers watcherBudget
	// unverifiedLog bounds how many notifications that failed verification are stored.
	unverifiedLog *logRate
	queryLog      lastQueries   // queries that learnt nothing new are not logged again
	claimSlots    chan struct{} // bounds the queries triggered by unverifiable notifications
}

var _ orderpay.PaymentCenter = (*Service)(nil)

// New returns a Service.
func New(cfg Config) (*Service, error) {
	cfg = cfg.withDefaults()
	switch {
	case cfg.Store == nil:
		return nil, errors.New("payment: Config.Store is required")
	case len(cfg.Channels) == 0:
		return nil, errors.New("payment: Config.Channels is required")
	case cfg.NotifyURL == nil:
		return nil, errors.New("payment: Config.NotifyURL is required")
	}
	if err := cfg.RefundRetryPlan.Validate(); err != nil {
		return nil, fmt.Errorf("payment: %s", orderpay.ErrorMessage(err))
	}
	for i, d := range cfg.QuerySchedule {
		if d <= 0 || (i > 0 && d <= cfg.QuerySchedule[i-1]) {
			return nil, errors.New("payment: QuerySchedule must be positive and increasing")
		}
	}
	return &Service{cfg: cfg, log: cfg.Logger, claimSlots: make(chan struct{}, 16),
		unverifiedLog: &logRate{perChannel: cfg.UnverifiedLogPerChannel, perSource: cfg.UnverifiedLogPerSource}}, nil
}

// PaymentNo is the payment number of an order: one payment per order, so it is derived
// from the order number and a retried request cannot create a second one.
func PaymentNo(orderNo string) string { return "P" + orderNo }

// OutTradeNo is the number of the seq-th channel attempt of a payment. It fits both
// channels' rules (Alipay ≤64 letters/digits/_; WeChat 6-32 letters/digits/_-|*).
func OutTradeNo(paymentNo string, seq int) string { return fmt.Sprintf("%sA%02d", paymentNo, seq) }

// Pay returns the instruction the buyer's device pays the order with, through the
// requested channel's method (a QR code, a cashier URL or form, a prepay id for the
// wallet). It finds or creates the payment order and its open attempt at that channel and
// method, and asks the channel only if that attempt has no instruction the buyer can still
// use; so a repeated request returns the same instruction, and concurrent requests share
// one attempt. One whose instruction expired (a WeChat H5 link after 5 minutes, a prepay id
// after 2 h) gets a fresh one for the same trade. An unknown channel answer leaves the
// attempt PAYING (it may exist at the channel) and is EUNAVAILABLE: the same request can
// be retried.
func (s *Service) Pay(ctx context.Context, req orderpay.PayRequest) (*orderpay.PayResult, error) {
	if req.Method == "" {
		req.Method = orderpay.MethodQR
	}
	if err := s.CheckPay(req.Channel, req.Method, req.Payer); err != nil {
		return nil, err
	}
	ch := s.cfg.Channels[req.Channel]
	if orderpay.PayerNeeded(req.Channel, req.Method) == "" {
		req.Payer = "" // a method that names no payer keeps none
	}
	// One transaction finds or creates the attempt and, unless it has a code to show,
	// takes the PAYING lock: one request at a time asks the channel for this payment; a
	// concurrent one (a double click, a second device) waits for its code instead.
	co, p, locked, err := s.openAttempt(ctx, req)
	if err != nil {
		return nil, err
	}
	if co.Payer != req.Payer {
		if locked {
			s.unlockPrepay(co.PaymentNo)
		}
		return nil, orderpay.Errorf(orderpay.ECONFLICT, "payment %s's %s %s attempt is another wallet user's", co.PaymentNo, co.Channel, co.Method)
	}
	if hasCode(co, orderpay.Now(s.cfg.Clock)) {
		return payResult(co), nil
	}
	if !locked {
		return s.awaitCode(ctx, co)
	}
	// The lock is let go in the transaction that stores the code; on any other way out, here.
	held := true
	defer func() {
		if held {
			s.unlockPrepay(co.PaymentNo)
		}
	}()
	preq := orderpay.PrecreateRequest{OutTradeNo: co.OutTradeNo, Amount: co.Amount, Subject: req.Subject,
		Deadline: req.Deadline, NotifyURL: s.cfg.NotifyURL(req.Channel), Method: co.Method, Payer: co.Payer, ClientIP: req.ClientIP}
	if s.cfg.ReturnURL != nil {
		preq.ReturnURL, preq.QuitURL = s.cfg.ReturnURL(req.OrderNo), s.cfg.ReturnURL(req.OrderNo)
	}
	res := orderpay.ChannelFor(ch, co.Method).Precreate(ctx, preq)
	log := s.log.With("order_no", req.OrderNo, "payment_no", co.PaymentNo, "out_trade_no", co.OutTradeNo, "channel", req.Channel,
		"method", co.Method)
	if res.Outcome == orderpay.OutcomeAccepted {
		if res.Pay == nil && co.Method == orderpay.MethodQR {
			res.Pay = orderpay.NewInstruction(req.Channel, orderpay.MethodQR, "code", res.QRCode)
		}
		if err := instructionOf(res.Pay, req.Channel, co.Method); err != nil {
			// An adapter's bug, never the buyer's: the attempt may exist at the channel.
			log.Error("prepay accepted without a usable instruction", "err", err)
			res.Outcome, res.Detail = orderpay.OutcomeUnknown, "accepted without a usable instruction: "+err.Error()
		}
	}
	switch res.Outcome {
	case orderpay.OutcomeAccepted:
		stored, released, err := s.recordQRCode(ctx, co, p, res)
		held = !released
		if err != nil {
			return nil, err
		}
		log.Info("pay instruction issued", "kind", res.Pay.Kind, "expires_at", stored.QRExpiresAt)
		return payResult(stored), nil
	case orderpay.OutcomeRejected:
		log.Warn("precreate rejected", "detail", res.Detail)
		if co.Status == orderpay.ChannelOrderCreated {
			err := s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) error {
				return tx.TransitionChannelOrder(ctx, orderpay.ChannelOrderChange{OutTradeNo: co.OutTradeNo, From: co.Status,
					To: orderpay.ChannelOrderFailed, Event: orderpay.ChannelOrderEventReject, At: orderpay.Now(s.cfg.Clock),
					Actor: "channel:" + req.Channel, Reason: res.Detail, Raw: res.Raw})
			})
			if err != nil && orderpay.ErrorCode(err) != orderpay.ECONFLICT {
				return nil, err
			}
		}
		// An attempt that was PAYING (an earlier answer was unknown) stays PAYING: only a
		// query can say whether that trade exists.
		return nil, orderpay.Errorf(orderpay.ECHANNEL, "the channel refused the payment: %s", res.Detail)
	default:
		log.Warn("precreate result unknown", "detail", res.Detail)
		if co.Status == orderpay.ChannelOrderCreated {
			next, err := s.submit(ctx, co, orderpay.ChannelOrderChange{Unknown: true, Reason: "precreate: " + res.Detail, Raw: res.Raw})
			if err != nil && orderpay.ErrorCode(err) != orderpay.ECONFLICT {
				return nil, err
			}
			if err == nil {
				s.startQueries(ctx, co.OutTradeNo, next)
			}
		}
		return nil, orderpay.Errorf(orderpay.EUNAVAILABLE, "the channel did not answer in time; retry the same request")
	}
}

// CheckPay says whether a pay request is one this service can take, whatever the order:
// a configured channel, one of its methods (default qr when empty), and the payer the
// method pays for. The API checks it before it looks at the order, so that a bad request is
// 400 on any order, never its state's 409.
func (s *Service) CheckPay(channel string, method orderpay.PayMethod, payer string) error {
	if _, ok := s.cfg.Channels[channel]; !ok {
		return orderpay.Errorf(orderpay.EINVALID, "channel must be one of %s, not %q", s.channelNames(), channel)
	}
	if method == "" {
		method = orderpay.MethodQR
	}
	if err := orderpay.CheckMethod(channel, method); err != nil {
		return err
	}
	if need := orderpay.PayerNeeded(channel, method); need != "" && payer == "" {
		return orderpay.Errorf(orderpay.EINVALID, "%s %s pays for one buyer: their %s is needed", channel, method, need)
	}
	return nil
}

// channelNames are the configured channels, for a message.
func (s *Service) channelNames() string {
	return strings.Join(slices.Sorted(maps.Keys(s.cfg.Channels)), ", ")
}

func payResult(co *orderpay.ChannelOrder) *orderpay.PayResult {
	pay := co.Pay
	if pay == nil && co.QRCode != "" { // a QR attempt stored before methods
		pay = orderpay.NewInstruction(co.Channel, orderpay.MethodQR, "code", co.QRCode)
	}
	return &orderpay.PayResult{PaymentNo: co.PaymentNo, Channel: co.Channel, Method: methodOf(co.Method), QRCode: co.QRCode, Pay: pay,
		ExpiresAt: co.QRExpiresAt}
}

// methodOf is m, or MethodQR for none (an attempt made before methods).
func methodOf(m orderpay.PayMethod) orderpay.PayMethod {
	if m == "" {
		return orderpay.MethodQR
	}
	return m
}

// instructionOf is nil if p is a complete instruction of channel's method m.
func instructionOf(p *orderpay.PayInstruction, channel string, m orderpay.PayMethod) error {
	if p == nil {
		return orderpay.Errorf(orderpay.EINTERNAL, "no instruction")
	}
	if p.Channel != channel || p.Method != m {
		return orderpay.Errorf(orderpay.EINTERNAL, "an instruction of %s %s, not %s %s", p.Channel, p.Method, channel, m)
	}
	return p.Check()
}

// openAttempt finds or creates the payment order and its open attempt at the channel and,
// if that attempt has no code the buyer can still pay, takes the payment's PAYING lock, in
// one transaction. locked says whether this request holds the lock.
func (s *Service) openAttempt(ctx context.Context, req orderpay.PayRequest) (co *orderpay.ChannelOrder, p *orderpay.Payment, locked bool, err error) {
	// Two requests for one order race to insert the attempt; the loser's insert is a unique
	// violation (ECONFLICT), and on the next pass it finds the winner's rows. (Two first
	// requests racing to insert the payment need no second pass: the loser's insert does
	// nothing, once the winner's has committed, and it reads the winner's payment.) Any
	// other conflict (another amount, a payment that ended) is the answer.
	for attempt := 0; attempt < 3; attempt++ {
		co, p, locked = nil, nil, false
		raced := false
		err = s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) (err error) {
			now := orderpay.Now(s.cfg.Clock)
			// The payment is made first (a first request's, most often), holding the lock:
			// its attempt, made next, has no code yet. If the order has one, that is read.
			p = &orderpay.Payment{No: PaymentNo(req.OrderNo), OrderNo: req.OrderNo, Amount: req.Amount, Status: orderpay.PaymentUnpaid,
				Subject: req.Subject, PayDeadline: req.Deadline, CreatedAt: now, UpdatedAt: now}
			err = tx.CreateLockedPayment(ctx, p, now.Add(prepayLease))
			newPayment := err == nil
			if orderpay.ErrorCode(err) == orderpay.ECONFLICT {
				p, err = tx.PaymentByOrder(ctx, req.OrderNo)
			}
			if err != nil {
				return err
			}
			if p.Amount != req.Amount {
				return orderpay.Errorf(orderpay.ECONFLICT, "payment %s is for %d fen, not %d", p.No, p.Amount, req.Amount)
			}
			if p.Status != orderpay.PaymentUnpaid && p.Status != orderpay.PaymentPaying {
				return orderpay.Errorf(orderpay.ECONFLICT, "payment %s is %s", p.No, p.Status)
			}
			// A payment this transaction created has no attempts yet: nothing to read.
			var attempts []orderpay.ChannelOrder
			if !newPayment {
				if attempts, err = tx.ChannelOrders(ctx, p.No); err != nil {
					return err
				}
			}
			for i := range attempts {
				a := &attempts[i]
				if a.Channel == req.Channel && methodOf(a.Method) == req.Method &&
					(a.Status == orderpay.ChannelOrderCreated || a.Status == orderpay.ChannelOrderPaying) {
					co = a
					break
				}
			}
			created := co == nil
			if created {
				co = &orderpay.ChannelOrder{OutTradeNo: OutTradeNo(p.No, len(attempts)+1), PaymentNo: p.No, Channel: req.Channel,
					Seq: len(attempts) + 1, Amount: p.Amount, Status: orderpay.ChannelOrderCreated, Method: req.Method, Payer: req.Payer,
					CreatedAt: now, UpdatedAt: now}
				if err := tx.CreateChannelOrder(ctx, co); err != nil {
					raced = orderpay.ErrorCode(err) == orderpay.ECONFLICT
					return err
				}
			}
			if newPayment {
				locked = true // taken with the payment
				return nil
			}
			if hasCode(co, now) {
				return nil
			}
			if locked, err = tx.LockPrepay(ctx, p.No, now.Add(prepayLease), now); err != nil || !locked || created {
				return err
			}
			// The lock's previous holder may have stored a code and let go after the read
			// above (PostgreSQL's READ COMMITTED: this read, after the lock's update, sees
			// its commit). If so, show that code and keep no lock.
			if co, err = tx.ChannelOrder(ctx, co.OutTradeNo); err != nil || !hasCode(co, now) {
				return err
			}
			locked = false
			return tx.UnlockPrepay(ctx, p.No)
		})
		if !raced {
			break
		}
	}
	return co, p, locked, err
}

// hasCode says whether the attempt has an instruction the buyer can still pay with at now.
func hasCode(co *orderpay.ChannelOrder, now time.Time) bool {
	return (co.QRCode != "" || co.Pay != nil) && now.Before(co.QRExpiresAt)
}

// submit moves a CREATED attempt to PAYING (with its QR code, or flagged unknown), and its
// payment from UNPAID to PAYING if this is the first attempt, and starts the attempt's
// safety net. It returns when the first query is due.
func (s *Service) submit(ctx context.Context, co *orderpay.ChannelOrder, c orderpay.ChannelOrderChange) (time.Time, error) {
	var next time.Time
	err := s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) (err error) {
		next, err = s.submitTx(ctx, tx, co, nil, c, orderpay.Now(s.cfg.Clock), false)
		return err
	})
	return next, err
}

// submitTx is submit in tx. With release, it also lets go of the payment's PAYING lock: in
// the payment's own transition when there is one (one statement), else alone. known is the
// payment as the caller read it, if it did: it is not read again. Its deadline never
// changes, and a status that moved on since is found by the transition's condition.
func (s *Service) submitTx(ctx context.Context, tx orderpay.Tx, co *orderpay.ChannelOrder, known *orderpay.Payment, c orderpay.ChannelOrderChange, now time.Time, release bool) (time.Time, error) {
	c.OutTradeNo, c.From, c.To, c.Event, c.At, c.Actor = co.OutTradeNo, orderpay.ChannelOrderCreated, orderpay.ChannelOrderPaying,
		orderpay.ChannelOrderEventSubmit, now, "payment-center"
	if err := tx.TransitionChannelOrder(ctx, c); err != nil {
		return time.Time{}, err
	}
	p := known
	if p == nil {
		var err error
		if p, err = tx.Payment(ctx, co.PaymentNo); err != nil {
			return time.Time{}, err
		}
	}
	next := s.nextQueryAt(co.CreatedAt, p.PayDeadline, 0, now)
	if c.Unknown {
		next = earlier(next, now.Add(s.cfg.UnknownRetry))
	}
	if err := tx.CreatePendingQuery(ctx, &orderpay.PendingQuery{OutTradeNo: co.OutTradeNo, PaymentNo: co.PaymentNo, Channel: co.Channel,
		NextAt: next, CreatedAt: now, UpdatedAt: now}); err != nil {
		return time.Time{}, err
	}
	if p.Status == orderpay.PaymentUnpaid {
		err := tx.TransitionPayment(ctx, orderpay.PaymentChange{No: p.No, From: p.Status, To: orderpay.PaymentPaying,
			Event: orderpay.PaymentEventStart, At: now, Actor: "payment-center", Reason: "attempt " + co.OutTradeNo, ReleasePrepay: release})
		if known == nil || orderpay.ErrorCode(err) != orderpay.ECONFLICT {
			return next, err
		}
		// It moved on since the caller read it (another attempt's code made it PAYING):
		// as for any payment no longer UNPAID.
	}
	if release {
		return next, tx.UnlockPrepay(ctx, p.No)
	}
	return next, nil
}

// prepayLease bounds the PAYING lock: longer than a precreate call can take, so that a
// holder that crashed releases it by itself.
const prepayLease = 15 * time.Second

func (s *Service) lockPrepay(ctx context.Context, paymentNo string) (bool, error) {
	var locked bool
	err := s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) (err error) {
		now := orderpay.Now(s.cfg.Clock)
		locked, err = tx.LockPrepay(ctx, paymentNo, now.Add(prepayLease), now)
		return err
	})
	return locked, err
}

func (s *Service) unlockPrepay(paymentNo string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) error { return tx.UnlockPrepay(ctx, paymentNo) }); err != nil {
		s.log.Warn("PAYING lock not released; it expires by itself", "payment_no", paymentNo, "err", err)
	}
}

// awaitCode waits for the request that holds the PAYING lock to store the attempt's code.
func (s *Service) awaitCode(ctx context.Context, co *orderpay.ChannelOrder) (*orderpay.PayResult, error) {
	// The lease runs on the wall clock and on the service's (a test's or the explorer's
	// moves by hand): whichever ends first.
	deadline, leaseEnd := time.Now().Add(prepayLease), orderpay.Now(s.cfg.Clock).Add(prepayLease)
	for time.Now().Before(deadline) && orderpay.Now(s.cfg.Clock).Before(leaseEnd) {
		orderpay.StepWaiting(ctx, "request that holds the PAYING lock")
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		cur, err := s.cfg.Store.ChannelOrder(ctx, co.OutTradeNo)
		if err != nil {
			return nil, err
		}
		if hasCode(cur, orderpay.Now(s.cfg.Clock)) {
			return payResult(cur), nil
		}
		if cur.Status != orderpay.ChannelOrderCreated && cur.Status != orderpay.ChannelOrderPaying {
			return nil, orderpay.Errorf(orderpay.ECONFLICT, "attempt %s is %s", cur.OutTradeNo, cur.Status)
		}
		// The holder let go without a code: the channel gave it no answer. Say so now
		// rather than wait out the lease; the buyer's retry asks again.
		if free, err := s.lockPrepay(ctx, co.PaymentNo); err == nil && free {
			// The holder may have stored its code and let go between the read above and
			// this lock: read once more under the lock before saying there is none.
			cur, err := s.cfg.Store.ChannelOrder(ctx, co.OutTradeNo)
			s.unlockPrepay(co.PaymentNo)
			if err == nil && hasCode(cur, orderpay.Now(s.cfg.Clock)) {
				return payResult(cur), nil
			}
			return nil, orderpay.Errorf(orderpay.EUNAVAILABLE, "the channel did not answer in time; retry the same request")
		}
	}
	return nil, orderpay.Errorf(orderpay.EUNAVAILABLE, "another request is asking the channel for this payment; retry")
}

// recordQRCode stores the code of an accepted precreate and lets go of the PAYING lock in
// the same transaction; released says whether it did. If a concurrent request stored a code
// first, that one is returned, so every caller shows the buyer the same code.
func (s *Service) recordQRCode(ctx context.Context, co *orderpay.ChannelOrder, p *orderpay.Payment, res orderpay.PrecreateResult) (stored *orderpay.ChannelOrder, released bool, err error) {
	now := orderpay.Now(s.cfg.Clock)
	var next time.Time
	err = s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) (err error) {
		if co.Status == orderpay.ChannelOrderCreated {
			next, err = s.submitTx(ctx, tx, co, p, orderpay.ChannelOrderChange{QRCode: res.QRCode, Pay: res.Pay, QRExpiresAt: res.QRExpiresAt,
				Reason: "prepay: " + res.Detail}, now, true)
			return err
		}
		if err := tx.AttachInstruction(ctx, co.OutTradeNo, res.QRCode, res.Pay, res.QRExpiresAt, now); err != nil {
			return err
		}
		return tx.UnlockPrepay(ctx, co.PaymentNo)
	})
	if err == nil {
		if co.Status == orderpay.ChannelOrderCreated {
			s.startQueries(ctx, co.OutTradeNo, next)
		}
		// The row as it now stands, times at the store's precision.
		out := *co
		out.Status, out.QRCode, out.Pay, out.Unknown = orderpay.ChannelOrderPaying, res.QRCode, res.Pay, false
		out.QRExpiresAt, out.UpdatedAt = res.QRExpiresAt.Truncate(time.Millisecond), now.Truncate(time.Millisecond)
		return &out, true, nil
	}
	if orderpay.ErrorCode(err) != orderpay.ECONFLICT {
		return nil, false, err
	}
	cur, rerr := s.cfg.Store.ChannelOrder(ctx, co.OutTradeNo)
	if rerr != nil {
		return nil, false, rerr
	}
	if !hasCode(cur, now) {
		return nil, false, orderpay.Errorf(orderpay.ECONFLICT, "attempt %s is %s", cur.OutTradeNo, cur.Status)
	}
	return cur, false, nil
}

// handleNotification verifies and applies a channel notification, and returns the reply the
// channel expects; seen gets what the notification log keeps (HandleNotification). Order of checks (docs/design.md §5): signature and identity (the adapter), then
// that the trade is ours, at this channel, for this amount; only then a conditional update.
// A notification that fails a check is never applied and gets an error, so the channel
// retries it; a duplicate is acknowledged and changes nothing.
func (s *Service) handleNotification(ctx context.Context, channel string, header http.Header, body []byte, seen *notifySeen) (orderpay.NotifyReply, error) {
	ch, ok := s.cfg.Channels[channel]
	if !ok {
		return orderpay.NotifyReply{}, orderpay.Errorf(orderpay.ENOTFOUND, "no channel %q", channel)
	}
	n, err := ch.VerifyNotification(ctx, header, body)
	s.cfg.Observer.NotificationReceived(channel, err == nil)
	if err != nil {
		// The trade it claims is unverified, but it is what an operator searches for.
		claimed := ch.NotificationTrade(header, body)
		s.log.Warn("notification rejected", "channel", channel, "out_trade_no", claimed, "code", orderpay.ErrorCode(err), "reason", orderpay.ErrorMessage(err))
		s.cfg.Observer.Notification(channel, "rejected")
		// Never applied; but it may be the only sign of a payment: query the attempt it
		// names, rate-limited (if it names something that can be a trade number at all).
		if tradeNoLike(claimed) {
			s.queryClaimed(ctx, claimed)
		}
		return orderpay.NotifyReply{}, err
	}
	seen.verified, seen.outTradeNo = true, n.OutTradeNo
	log := s.log.With("channel", channel, "out_trade_no", n.OutTradeNo, "notify_id", n.NotifyID)
	// ours is nil if the attempt read (co, or the read's error) is one this notification
	// may be about: ours, of this channel, for the amount notified.
	ours := func(co *orderpay.ChannelOrder, err error) error {
		if orderpay.ErrorCode(err) == orderpay.ENOTFOUND {
			s.cfg.Observer.Notification(channel, "rejected")
			log.Warn("notification for an unknown trade")
			return orderpay.Errorf(orderpay.EINVALID, "out_trade_no %q is not ours", n.OutTradeNo)
		}
		if err != nil {
			return err
		}
		if co.Channel != channel {
			s.cfg.Observer.Notification(channel, "rejected")
			log.Warn("notification from the wrong channel", "attempt_channel", co.Channel)
			return orderpay.Errorf(orderpay.EUNAUTHORIZED, "trade %s does not belong to %s", n.OutTradeNo, channel)
		}
		if n.Amount != co.Amount {
			s.cfg.Observer.Notification(channel, "rejected")
			log.Error("notification amount mismatch: not applied", "notified", n.Amount, "expected", co.Amount, "payment_no", co.PaymentNo)
			return orderpay.Errorf(orderpay.EINVALID, "amount %d fen does not match trade %s", n.Amount, n.OutTradeNo)
		}
		return nil
	}
	// The record says which notification came; its body is kept once: in the history of the
	// transition it made, or in the notification log.
	rec := orderpay.NotificationRecord{Channel: channel, NotifyID: n.NotifyID, OutTradeNo: n.OutTradeNo, Outcome: n.Outcome,
		Amount: n.Amount, ReceivedAt: orderpay.Now(s.cfg.Clock)}
	if n.OutRefundNo == "" && n.Outcome == orderpay.OutcomePaid {
		// The attempt is read, and checked, in the transaction that applies the payment:
		// one read, and nothing of a notification that fails the check is kept.
		var known bool
		if err := s.applyPaid(ctx, &orderpay.ChannelOrder{OutTradeNo: n.OutTradeNo, Channel: channel}, paidEvidence{tradeNo: n.TradeNo,
			paidAt: n.PaidAt, source: "notification " + n.NotifyID, raw: n.Raw, record: &rec, known: &known, check: ours,
			log: s.appliedLogEntry(channel, n.OutTradeNo, body), logged: &seen.logged}); err != nil {
			return orderpay.NotifyReply{}, err
		}
		s.noteResult(channel, !known, seen, log)
		return ch.Ack(), nil
	}
	co, err := s.cfg.Store.ChannelOrder(ctx, n.OutTradeNo)
	if err := ours(co, err); err != nil {
		return orderpay.NotifyReply{}, err
	}
	if n.OutRefundNo != "" {
		applied, err := s.applyRefundNotification(ctx, co, n, rec)
		if err != nil {
			s.cfg.Observer.Notification(channel, "rejected")
			return orderpay.NotifyReply{}, err
		}
		s.noteResult(channel, applied, seen, log)
		return ch.Ack(), nil
	}
	seen.ignored = string(n.Outcome)
	s.cfg.Observer.Notification(channel, "ignored")
	// Only payments are applied from notifications; other states come from queries.
	err = s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) error { return tx.RecordNotification(ctx, rec) })
	if err != nil {
		return orderpay.NotifyReply{}, err
	}
	return ch.Ack(), nil
}

// noteResult counts a verified notification that was applied, or a duplicate: a replay of
// one already applied, or news the payment center knew already (a query got there first),
// acknowledged and changing nothing.
func (s *Service) noteResult(channel string, applied bool, seen *notifySeen, log *slog.Logger) {
	if applied {
		s.cfg.Observer.Notification(channel, orderpay.NotifyApplied)
		return
	}
	seen.duplicate = true
	s.cfg.Observer.Notification(channel, orderpay.NotifyDuplicate)
	log.Info("duplicate notification: already applied, acknowledged, nothing changed")
}

// tradeNoLike reports whether s can be one of orderpay's out_trade_no: what an unverified
// notification claims is looked up only then, never as arbitrary bytes.
func tradeNoLike(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// paidEvidence is a verified statement from a channel that an attempt was paid.
type paidEvidence struct {
	tradeNo string
	paidAt  time.Time
	source  string // "notification <id>" or "query"
	raw     string
	record  *orderpay.NotificationRecord // the notification to store with the change, if any
	// known, if set, is told whether the attempt was SUCCESS already: the evidence changed
	// nothing.
	known *bool
	// log, if set, is the notification's log entry, written in the same transaction with
	// its result settled there: one commit for the change and its log; logged is told
	// whether it was.
	log    *orderpay.NotificationLogEntry
	logged *bool
	// check, if set, is given the attempt as the transaction reads it (or the read's
	// error) before anything is applied; its error fails the transaction, and nothing of
	// it is kept. A notification's attempt is read only there.
	check func(co *orderpay.ChannelOrder, err error) error
}

// applyPaid marks a verified-paid attempt SUCCESS, its payment SUCCESS, and writes
// payment.succeeded, in one transaction; then tells the order system directly. Applying the
// same evidence twice changes nothing the second time.
//
// Money the order cannot take is never dropped: an attempt paid after it was closed (late)
// or after another attempt of the same payment was paid (duplicate), or after the payment
// was closed, is recorded SUCCESS and refunded in the same transaction (docs/design.md §5).
//
// co names the attempt: with ev.check, only its OutTradeNo and Channel need be known, and
// the rest is what the transaction read.
func (s *Service) applyPaid(ctx context.Context, co *orderpay.ChannelOrder, ev paidEvidence) error {
	var announce *orderpay.PaymentSucceeded
	var refund *orderpay.ChannelRefund
	var latency time.Duration
	// The order system takes the payment in this transaction when it can (orderApplied is
	// then what it does after the commit); when it cannot, or its part fails, the payment
	// commits alone and the order system is told after (tellOrderSystem).
	inTx, _ := s.cfg.Results.(orderpay.PaymentResultsInTx)
	var orderApplied func()
	var read *orderpay.ChannelOrder // the attempt as the transaction last read it
	apply := func(tx orderpay.Tx) error {
		announce, refund, orderApplied = nil, nil, nil
		now := orderpay.Now(s.cfg.Clock)
		if ev.record != nil {
			if err := tx.RecordNotification(ctx, *ev.record); err != nil {
				return err
			}
		}
		cur, err := tx.ChannelOrder(ctx, co.OutTradeNo)
		if ev.check != nil {
			err = ev.check(cur, err)
		}
		if err != nil {
			return err
		}
		read = cur
		paidAt := cmp.Or(ev.paidAt, now)
		late := cur.Status == orderpay.ChannelOrderClosed || cur.Status == orderpay.ChannelOrderFailed
		if l, ok := tx.(orderpay.OpsLog); ok && ev.log != nil {
			e := *ev.log
			e.Settle(cur.Status != orderpay.ChannelOrderSuccess)
			if err := l.LogNotification(ctx, &e); err != nil {
				return err
			}
			*ev.logged = true
		}
		switch cur.Status {
		case orderpay.ChannelOrderSuccess:
			if ev.known != nil {
				*ev.known = true
			}
			return nil // already applied: a duplicate notification, or a query after one
		case orderpay.ChannelOrderCreated:
			// The channel says paid, so the trade was submitted even if we never recorded it
			// (a crash between the channel call and the commit). The money is the truth.
			if _, err := s.submitTx(ctx, tx, cur, nil, orderpay.ChannelOrderChange{Reason: "paid at the channel before it was recorded as submitted"}, now, false); err != nil {
				return err
			}
			cur.Status = orderpay.ChannelOrderPaying
		}
		if err := tx.TransitionChannelOrder(ctx, s.withFee(cur, orderpay.ChannelOrderChange{OutTradeNo: cur.OutTradeNo, From: cur.Status,
			To: orderpay.ChannelOrderSuccess, Event: orderpay.ChannelOrderEventSucceed, At: now, Actor: "channel:" + cur.Channel,
			Reason: ev.source, Raw: ev.raw, TradeNo: ev.tradeNo, PaidAt: paidAt})); err != nil {
			return err
		}
		if cur.Method == orderpay.MethodBarcode && !late {
			// Read after the attempt's row is taken: a reverse marked on its way before
			// this transaction took it may refund this payment (reverseAttempt decides).
			if err := checkNoReverse(ctx, tx, cur.OutTradeNo); err != nil {
				return err
			}
		}
		p, err := tx.Payment(ctx, cur.PaymentNo)
		if err != nil {
			return err
		}
		if late || p.Status != orderpay.PaymentPaying {
			reason := orderpay.RefundReasonLate
			if p.Status == orderpay.PaymentSuccess {
				reason = orderpay.RefundReasonDuplicate
			}
			refund, err = s.createRefund(ctx, tx, cur, reason, now)
			return err
		}
		if err := tx.TransitionPayment(ctx, orderpay.PaymentChange{No: p.No, From: p.Status, To: orderpay.PaymentSuccess,
			Event: orderpay.PaymentEventSucceed, At: now, Actor: "channel:" + cur.Channel, Reason: ev.source,
			PaidChannel: cur.Channel, PaidOutTradeNo: cur.OutTradeNo}); err != nil {
			return err
		}
		latency = now.Sub(cur.CreatedAt)
		announce = &orderpay.PaymentSucceeded{PaymentNo: p.No, OrderNo: p.OrderNo, Amount: p.Amount, Channel: cur.Channel,
			OutTradeNo: cur.OutTradeNo, TradeNo: ev.tradeNo, PaidAt: paidAt}
		if err := orderpay.EnqueueJSON(ctx, tx, orderpay.SubjectPaymentSucceeded, p.No, announce, now); err != nil {
			return err
		}
		if inTx != nil {
			var err error
			if orderApplied, err = inTx.PaymentSucceededTx(ctx, tx, *announce); err != nil {
				return orderPartFailed{err}
			}
		}
		return nil
	}
	err := s.retryConflicts(ctx, apply)
	if read != nil {
		co = read
	}
	log := s.log.With("out_trade_no", co.OutTradeNo, "payment_no", co.PaymentNo, "channel", co.Channel)
	var failed orderPartFailed
	if errors.As(err, &failed) {
		log.Info("the order's part failed in the payment's transaction; committing the payment alone", "err", failed.err)
		inTx = nil
		err = s.retryConflicts(ctx, apply)
	}
	if err != nil {
		return err
	}
	if refund != nil {
		s.cfg.Observer.AutoRefund(co.Channel, refund.Reason)
		log.Error("money the order cannot take: refunding it", "reason", refund.Reason, "amount", refund.Amount,
			"out_refund_no", refund.OutRefundNo, "source", ev.source)
		s.cfg.RefundCreated()
	}
	if announce != nil {
		source, _, _ := strings.Cut(ev.source, " ")
		s.cfg.Observer.PaymentConverged(co.Channel, source, latency)
		log.Info("payment succeeded", "order_no", announce.OrderNo, "amount", announce.Amount, "source", ev.source)
		s.cfg.OutboxWritten()
		if orderApplied != nil {
			orderApplied()
		} else {
			s.tellOrderSystem(ctx, *announce)
		}
	}
	return nil
}

// orderPartFailed is the order system's error from its part of a payment's transaction:
// the transaction rolls back, and runs again without that part.
type orderPartFailed struct{ err error }

func (e orderPartFailed) Error() string { return "the order's part: " + e.err.Error() }

// retryConflicts runs fn in a transaction, again if it loses a race: a conditional update
// that finds the row already moved (ECONFLICT) rolls back, and the next run reads the new
// state and sees the work done.
func (s *Service) retryConflicts(ctx context.Context, fn func(tx orderpay.Tx) error) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = s.cfg.Store.InTx(ctx, fn); orderpay.ErrorCode(err) != orderpay.ECONFLICT {
			return err
		}
	}
	return err
}

// tellOrderSystem is the fast path of "同步+异步": call the order system directly,
// a few times. A failure is only logged, because the payment.succeeded event written in the
// same transaction as the success reaches the order system through the bus anyway.
func (s *Service) tellOrderSystem(ctx context.Context, ev orderpay.PaymentSucceeded) {
	if s.cfg.Results == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	var err error
	for attempt := 0; attempt < s.cfg.ResultCallAttempts; attempt++ {
		callCtx, cancel := context.WithTimeout(ctx, s.cfg.ResultCallTimeout)
		err = s.cfg.Results.PaymentSucceeded(callCtx, ev)
		cancel()
		if reason, refused := orderpay.Refusal(err); refused {
			// The order cannot take the payment (it was cancelled meanwhile, or sold out):
			// send it back. Only an explicit refusal does this: a conflict is a race the
			// next call or the bus delivery settles.
			if rerr := s.RefundRejected(ctx, ev, reason); rerr != nil {
				s.log.Error("refunding a payment the order refused failed; the bus path retries", "order_no", ev.OrderNo, "err", rerr)
			}
			return
		}
		if err == nil {
			break
		}
		time.Sleep(time.Duration(attempt+1) * 50 * time.Millisecond)
	}
	if err != nil {
		s.log.Warn("direct result call failed; the bus will deliver it", "order_no", ev.OrderNo, "payment_no", ev.PaymentNo, "err", err)
	}
}

// withFee is c, a move of co to SUCCESS, with the fee co expects to be charged when its
// channel has a contract (Config.Fees): the contract's rate for co's method, applied to its
// amount and rounded as the contract says. Without a contract c records none.
func (s *Service) withFee(co *orderpay.ChannelOrder, c orderpay.ChannelOrderChange) orderpay.ChannelOrderChange {
	rule, ok := s.cfg.Fees.Rule(co.Channel)
	if !ok {
		return c
	}
	c.FeeRecorded = true
	c.Fee, c.FeeRate = rule.FeeFor(co.Amount, co.Method)
	return c
}
