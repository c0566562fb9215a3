package chaos

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"time"

	"orderpay"
	"orderpay/channel/sim"
)

// Barcode buyers (docs/barcode.md, 付款码): a share of the buyers pay at a counter. The
// buyer's wallet shows a payment code (the simulator's POST /sim/wallet/codes, with how the
// buyer will behave), and the run's till, an app of the payments API created at set-up,
// scans it: POST /v1/pos/payments with its own Idempotency-Key per sale, for a walk-in sale
// (an amount) or for one of the shop's orders (order_no; the buyer orders first, as every
// buyer does). The server answers within its --pos-wait (wall time, drawn per seed in
// [20 s, 35 s]): PAID, REFUSED, CANCELLED, or UNKNOWN when the buyer's time ran out first.
// A till whose request fails at the transport level (the server was killed) sends it again
// under the same key; half of the tills that are told UNKNOWN poll GET
// /v1/pos/payments/{no} every poll_after_seconds until the answer is final, as the till page
// does, and the others leave it (the cashier took another way), so that the safety net ends
// those with nobody asking. I9 (chaos/audit) then holds every trade against the till's
// answer and the channel.

// DefaultBarcodeShare is the share of the buyers who pay at a till by default.
const DefaultBarcodeShare = 0.2

// ParseBarcodeShare reads --barcode-share: "" for DefaultBarcodeShare, "none", or a share in
// [0, 1].
func ParseBarcodeShare(v string) (float64, error) {
	return parseShare("barcode-share", v, "none", map[string]float64{"": DefaultBarcodeShare, "none": 0})
}

const (
	// barcodeStream is the PCG stream of a barcode buyer's own draws (when a password buyer
	// confirms, whether the till polls), so that the draws of every other buyer, and of the
	// barcode buyers' orders, are what they were.
	barcodeStream = 0xba4c0de5ba4c0de5
	// barcodeCombos are the barcode buyers' combinations: every behaviour of the
	// simulator's wallet, both channels, a walk-in sale or a shop order. The k-th barcode
	// buyer of a run takes combination (k + seed) mod barcodeCombos, so that every one has
	// buyers in every run of 20 barcode buyers or more.
	barcodeCombos = 5 * 2 * 2
	// minPasswordAfter and maxPasswordAfter bound when a password buyer confirms (and a
	// wrong-password buyer types the right one), counted from the till's payment call.
	minPasswordAfter, maxPasswordAfter = 2 * time.Second, 12 * time.Second
	// wechatUserPayingPast is how much longer than the till's wait the simulated WeChat Pay
	// keeps a walked-away buyer's barcode order USERPAYING (sim.Config.WechatUserPayingFor,
	// a minute by default): WeChat refuses to reverse it meanwhile, so every such sale is
	// UNKNOWN to its till and ended by the safety net, once WeChat ends it PAYERROR, in every
	// run, and the run does not wait a minute for it (25 to 40 s after the scan).
	wechatUserPayingPast = 5 * time.Second
	// posTills are the till ids the till app's sales are spread over.
	posTills = 4
	// posRounds is how many times a till sends a sale that got no answer (the transport
	// failed for the client's RetryFor, or a 5xx) under the same key.
	posRounds = 4
	// posPollFor bounds how long after the scan a till polls an UNKNOWN sale: the safety
	// net's last reverse comes long before.
	posPollFor = 4 * time.Minute
	// aimedCrashWait bounds how long the crash aimed at the barcode loop waits for a till's
	// request to have been in flight for aimedCrashAge.
	aimedCrashWait, aimedCrashAge = 45 * time.Second, 2 * time.Second
)

// Till's final answers, as the report counts them: the API's statuses, and what a till
// ends with when it has none.
const (
	answerError   = "ERROR"    // the till never got an answer it could read (a 4xx, or no answer after every round)
	answerNoOrder = "NO_ORDER" // the buyer could not order, so nothing was scanned
)

// BarcodePlan is a barcode buyer's script.
type BarcodePlan struct {
	Channel string // the wallet whose code the buyer shows
	// Behaviour is what the buyer does once the till uses the code: sim.CodeConfirm,
	// CodePassword, CodeWrongPassword, CodeNever or CodeShort.
	Behaviour string
	// WalkIn: a walk-in sale (an amount, the plan's lines at catalogue prices); else one of
	// the shop's orders, which the buyer places first.
	WalkIn bool
	// After is when a password buyer confirms, counted from the payment call.
	After time.Duration
	// Poll: a till told UNKNOWN polls until the answer is final; else it leaves it.
	Poll bool
}

// Kind is "walk-in" or "order".
func (p BarcodePlan) Kind() string {
	if p.WalkIn {
		return "walk-in"
	}
	return "order"
}

// Row is the report's row of the plan: channel and behaviour ("wechat:never").
func (p BarcodePlan) Row() string { return p.Channel + ":" + p.Behaviour }

// barcodePlan is buyer i's barcode script in this population, or nil if buyer i does not
// pay at a till. The buyers who do are spread evenly: buyer i is one if ⌊(i+1)·share⌋ >
// ⌊i·share⌋, so that any first n buyers hold ⌊n·share⌋ of them.
func (pop Population) barcodePlan(seed uint64, i int) *BarcodePlan {
	if pop.Barcode <= 0 {
		return nil
	}
	k := int(float64(i) * pop.Barcode)
	if int(float64(i+1)*pop.Barcode) <= k {
		return nil
	}
	c := (k + int(seed%barcodeCombos)) % barcodeCombos
	p := &BarcodePlan{Behaviour: sim.CodeBehaviours[c%5], Channel: orderpay.ChannelAlipay, WalkIn: (c/10)%2 == 0}
	if (c/5)%2 == 1 {
		p.Channel = orderpay.ChannelWechat
	}
	rng := rand.New(rand.NewPCG(seed^barcodeStream, uint64(i)))
	span := int64((maxPasswordAfter - minPasswordAfter) / (100 * time.Millisecond))
	p.After = minPasswordAfter + time.Duration(rng.Int64N(span+1))*100*time.Millisecond
	if p.Behaviour != sim.CodePassword && p.Behaviour != sim.CodeWrongPassword {
		p.After = 0
	}
	p.Poll = rng.IntN(2) == 0
	return p
}

// setUpTill creates the run's till: an app of the payments API that takes both channels.
func (r *runner) setUpTill(ctx context.Context) error {
	if r.population.Barcode == 0 {
		return nil
	}
	app, err := r.client.CreateApp(ctx, r.runID+"-till", nil, []string{orderpay.ChannelAlipay, orderpay.ChannelWechat})
	if err != nil {
		return fmt.Errorf("chaos: create the till: %w", err)
	}
	r.tillKey = app.APIKey
	return nil
}

// wechatUserPayingFor is how long the run's simulated WeChat Pay keeps a walked-away buyer's
// barcode order USERPAYING: the till's wait and wechatUserPayingPast.
func (r *runner) wechatUserPayingFor() time.Duration {
	return r.settings.PosWait + wechatUserPayingPast
}

// posKey is the Idempotency-Key of buyer i's sale: one per sale, the same on every retry.
func (r *runner) posKey(i int) string { return fmt.Sprintf("%s-pos-%d", r.runID, i) }

// barcodeRecord is what a barcode buyer's till saw.
type barcodeRecord struct {
	Index      int
	Plan       BarcodePlan
	Key        string
	OutTradeNo string
	// Answer is the till's final answer (PAID, REFUSED, CANCELLED, or UNKNOWN when it
	// stopped at UNKNOWN), or answerError / answerNoOrder.
	Answer string
	// Scan is when the till's first request began; Final when its final answer arrived.
	Scan, Final time.Time
	// Unknown: the till was told UNKNOWN first; Polled: and it polled.
	Unknown, Polled bool
	// Replayed: an answer came with Idempotent-Replayed (a retry found the sale).
	Replayed bool
	// Err says why the till has no answer (Answer answerError): the last error's status and
	// code, and its message without numbers.
	Err string
}

// digits are the numbers of a message.
var digits = regexp.MustCompile(`[0-9][0-9.]*`)

// tillError names a till's error for the report: its status and code, and the server's
// message with its numbers (order and payment numbers, ages) made N.
func tillError(err error) string {
	var e *APIError
	if !errors.As(err, &e) {
		return ErrorKey(err)
	}
	var body struct {
		Error struct{ Message string } `json:"error"`
	}
	_ = json.Unmarshal([]byte(e.Body), &body)
	msg := digits.ReplaceAllString(body.Error.Message, "N")
	return strings.TrimSpace(ErrorKey(err) + ": " + msg)
}

// posBegin and posEnd mark a till's request in flight, for the crasher.
func (r *runner) posBegin(i int) {
	r.posMu.Lock()
	defer r.posMu.Unlock()
	r.posInFlight[i] = time.Now()
}

func (r *runner) posEnd(i int) {
	r.posMu.Lock()
	defer r.posMu.Unlock()
	delete(r.posInFlight, i)
}

// markKilled marks the tills' requests in flight as killed mid-loop and counts them.
func (r *runner) markKilled() int {
	r.posMu.Lock()
	defer r.posMu.Unlock()
	for i := range r.posInFlight {
		r.killedMidLoop[i] = true
	}
	return len(r.posInFlight)
}

// wasKilled reports whether a kill met buyer i's till request.
func (r *runner) wasKilled(i int) bool {
	r.posMu.Lock()
	defer r.posMu.Unlock()
	return r.killedMidLoop[i]
}

// awaitPosInFlight waits, up to aimedCrashWait, until a till's request has been in flight
// for aimedCrashAge: its attempt is written and its payment call made, so that a kill now
// lands in the middle of the payment center's loop. It reports whether one did.
func (r *runner) awaitPosInFlight(ctx context.Context) bool {
	until := time.Now().Add(aimedCrashWait)
	for time.Now().Before(until) {
		r.posMu.Lock()
		ripe := false
		for _, at := range r.posInFlight {
			ripe = ripe || time.Since(at) >= aimedCrashAge
		}
		r.posMu.Unlock()
		if ripe {
			return true
		}
		if !sleepCtx(ctx, 50*time.Millisecond) {
			return false
		}
	}
	return false
}

// barcodeScript is a barcode buyer's script: order (for a shop order), show a code, and the
// till's sale. It returns false: the till's own polling is part of the script.
func (b *buyer) barcodeScript(ctx context.Context) bool {
	bp := *b.plan.Barcode
	rec := barcodeRecord{Index: b.plan.Index, Plan: bp, Key: b.r.posKey(b.plan.Index)}
	defer func() {
		b.r.barcodeMu.Lock()
		b.r.barcodes = append(b.r.barcodes, rec)
		b.r.barcodeMu.Unlock()
	}()
	req := PosRequest{StoreID: "chaos-store", TillID: fmt.Sprintf("till-%d", b.plan.Index%posTills)}
	if bp.WalkIn {
		req.Amount, req.Description = b.appAmount(), "chaos walk-in"
		b.r.stats.created(time.Now())
	} else {
		if !b.create(ctx) {
			rec.Answer = answerNoOrder
			return false
		}
		req.OrderNo = b.orderNo
	}
	var code *PayCodeView
	if err := b.retry(ctx, "pos_code", func() (err error) {
		code, err = b.r.client.IssueCode(ctx, bp.Channel, b.id(), bp.Behaviour, bp.After)
		return err
	}); err != nil {
		rec.Answer, rec.Err = answerError, "the wallet's code: "+tillError(err)
		return false
	}
	req.AuthCode = code.AuthCode
	rec.Scan = time.Now()
	b.r.stats.posScanned(rec.Scan)
	v, err := b.posPay(ctx, rec.Key, req)
	if err != nil {
		rec.Answer, rec.Err = answerError, tillError(err)
		if b.r.wasKilled(b.plan.Index) {
			rec.Err += " (after a kill)"
		}
		return false
	}
	rec.OutTradeNo, rec.Replayed, rec.Answer, rec.Final = v.No, v.Replayed, v.Status, time.Now()
	if v.Status == string(orderpay.BarcodeUnknown) {
		rec.Unknown = true
		if bp.Poll {
			rec.Polled = true
			rec.Answer, rec.Final = b.pollPos(ctx, v, rec.Scan)
		}
	}
	if rec.Replayed {
		b.r.stats.outcome("barcode: a till's retry under the same Idempotency-Key found its sale (Idempotent-Replayed)")
	}
	return false
}

// posPay is the till's sale: POST /v1/pos/payments, sent again under the same key while it
// gets no answer (a failure at the transport level lasting the client's RetryFor, or a
// 5xx), at most posRounds times. The buyer's slot is given up while the till waits.
func (b *buyer) posPay(ctx context.Context, key string, req PosRequest) (*PosView, error) {
	var err error
	for round := 0; round < posRounds; round++ {
		var v *PosView
		b.r.posBegin(b.plan.Index)
		b.r.release()
		v, err = b.r.client.PosPay(ctx, b.r.tillKey, key, req)
		b.r.acquire()
		b.r.posEnd(b.plan.Index)
		if err == nil {
			return v, nil
		}
		b.r.stats.apiError("pos_pay", err)
		if ctx.Err() != nil || (StatusOf(err) != 0 && StatusOf(err) < 500) {
			return nil, err
		}
		if !b.wait(ctx, 500*time.Millisecond) {
			return nil, err
		}
	}
	return nil, err
}

// pollPos is a till told UNKNOWN asking again every poll_after_seconds, as the till page
// does, until the answer is final (or posPollFor after the scan). It returns the last
// answer and when it came.
func (b *buyer) pollPos(ctx context.Context, v *PosView, scan time.Time) (string, time.Time) {
	every := time.Duration(max(v.PollAfterSeconds, 1)) * time.Second
	status, at := v.Status, time.Now()
	for time.Since(scan) < posPollFor {
		if !b.wait(ctx, every) {
			break
		}
		cur, err := b.r.client.PosPayment(ctx, b.r.tillKey, v.No)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			b.r.stats.apiError("pos_get", err)
			continue
		}
		status, at = cur.Status, time.Now()
		if status != string(orderpay.BarcodeUnknown) {
			break
		}
	}
	if status == string(orderpay.BarcodeUnknown) {
		b.r.stats.outcome("barcode: a till polled an UNKNOWN sale until it gave up")
	}
	return status, at
}

// BarcodeReport is what the barcode buyers' tills saw, and how their trades ended.
type BarcodeReport struct {
	Share  float64 `json:"share"`
	Buyers int     `json:"buyers"`
	WalkIn int     `json:"walk_in"`
	Orders int     `json:"orders"`
	// PosWait is the server's --pos-wait; WechatUserPayingFor how long the simulated WeChat
	// keeps a walked-away buyer's order USERPAYING. Both wall time.
	PosWait             string `json:"pos_wait"`
	WechatUserPayingFor string `json:"wechat_userpaying_for"`
	// KilledMidLoop counts the sales whose till's request was in flight when the server was
	// killed; CrashesMidLoop the kills that met at least one.
	KilledMidLoop  int `json:"killed_mid_loop"`
	CrashesMidLoop int `json:"crashes_mid_loop"`
	// Rows are per channel and behaviour ("wechat:never").
	Rows map[string]BarcodeRow `json:"by_behaviour"`
	// TillAnswers counts the till payments in the database by the first final answer
	// recorded ("none": never given one, the till not asking again).
	TillAnswers map[string]int `json:"till_answers"`
	// Errors counts why tills got no answer, by channel:behaviour, kind (walk-in or order)
	// and error ("wechat:never order 409 ECONFLICT: order N passed its pay deadline (after a
	// kill)").
	Errors map[string]int `json:"errors,omitempty"`
	// WalkInsOpen counts the walk-in sales still OPEN at the audit, and WalkInsOpenBy the
	// same by their till's first final answer ("none": never given one). Every one should
	// have been closed when its trade ended, whether or not its till asked again (the
	// server settles a sale whose till never does when its safety net ends the trade), and
	// at its deadline (5 minutes, wall time) at the latest: these are sales left open.
	WalkInsOpen   int            `json:"walk_ins_open"`
	WalkInsOpenBy map[string]int `json:"walk_ins_open_by_answer,omitempty"`
}

// BarcodeRow is one channel and behaviour of the barcode buyers.
type BarcodeRow struct {
	Buyers int `json:"buyers"`
	// Answers counts the tills' final answers: PAID, REFUSED, CANCELLED, UNKNOWN (told
	// UNKNOWN and not polling, or polled in vain), ERROR, NO_ORDER.
	Answers map[string]int `json:"answers"`
	// ScanToAnswerMS is the time from the scan (the till's first request) to its final
	// answer, from the request or from the poll that saw it final; for final answers only.
	ScanToAnswerMS Latency `json:"scan_to_answer_ms"`
	// SafetyNet counts the trades ended after their loop was over (the till's wait passed,
	// or the server running it was killed): by the safety net's queries and reverses, or an
	// order's timeout close. Polled counts the tills told UNKNOWN that polled; Killed the
	// sales whose request was in flight at a kill.
	SafetyNet int `json:"safety_net"`
	Polled    int `json:"polled"`
	Killed    int `json:"killed"`
}

// barcodeRows are the report's rows in order: each channel, each behaviour.
func barcodeRows() []string {
	var rows []string
	for _, ch := range []string{orderpay.ChannelAlipay, orderpay.ChannelWechat} {
		for _, b := range sim.CodeBehaviours {
			rows = append(rows, ch+":"+b)
		}
	}
	return rows
}

// barcodeAnswers are the answers' columns in order.
var barcodeAnswers = []string{string(orderpay.BarcodePaid), string(orderpay.BarcodeRefused), string(orderpay.BarcodeCancelled),
	string(orderpay.BarcodeUnknown), answerError}

// attemptEnd is a barcode attempt as the database has it: when it was made and when it
// ended (its first move to SUCCESS, CLOSED or FAILED; zero if it never did).
type attemptEnd struct{ Created, Ended time.Time }

// barcodeEnds reads every till payment's attempt by its Idempotency-Key.
func (r *runner) barcodeEnds(ctx context.Context) (map[string]attemptEnd, error) {
	rows, err := r.store.DB().QueryContext(ctx, `SELECT t.idempotency_key, co.created_at, COALESCE(MIN(h.at), 0)
		FROM till_payments t JOIN channel_orders co ON co.out_trade_no = t.out_trade_no
		LEFT JOIN history h ON h.entity = '`+orderpay.EntityChannelOrder+`' AND h.entity_no = co.out_trade_no
			AND h.to_status IN ('SUCCESS', 'CLOSED', 'FAILED')
		GROUP BY t.idempotency_key, co.created_at`)
	if err != nil {
		return nil, fmt.Errorf("chaos: read the till payments: %w", err)
	}
	defer rows.Close()
	out := map[string]attemptEnd{}
	for rows.Next() {
		var key string
		var created, ended int64
		if err := rows.Scan(&key, &created, &ended); err != nil {
			return nil, err
		}
		e := attemptEnd{Created: orderpay.FromMillis(created)}
		if ended != 0 {
			e.Ended = orderpay.FromMillis(ended)
		}
		out[key] = e
	}
	return out, rows.Err()
}

// walkInsWaitingQuery counts the walk-in sales (the till's app payments, merchant_order_no
// "pos-…") that are OPEN with nothing left to do but their deadline: their payment is not
// paid and has no open attempt. The server should have closed them when their trade ended;
// the settle phase does not wait for their deadline (minutes of wall time), and the report
// counts them.
const walkInsWaitingQuery = `SELECT COUNT(*) FROM app_payments ap JOIN payments p ON p.payment_no = ap.payment_no
	WHERE ap.status = 'OPEN' AND ap.merchant_order_no LIKE 'pos-%' AND p.status IN ('UNPAID', 'PAYING')
	AND NOT EXISTS (SELECT 1 FROM channel_orders co WHERE co.payment_no = p.payment_no AND co.status IN ('CREATED', 'PAYING'))`

// barcodeReport sums the barcode buyers' records, with how their trades ended from the
// database.
func (r *runner) barcodeReport(ctx context.Context, tillAnswers map[string]int) (*BarcodeReport, error) {
	if r.population.Barcode == 0 {
		return nil, nil
	}
	ends, err := r.barcodeEnds(ctx)
	if err != nil {
		return nil, err
	}
	rep := &BarcodeReport{Share: r.population.Barcode, PosWait: r.settings.PosWait.String(), WechatUserPayingFor: r.wechatUserPayingFor().String(),
		Rows: map[string]BarcodeRow{}, TillAnswers: maps.Clone(tillAnswers)}
	if rep.TillAnswers == nil {
		rep.TillAnswers = map[string]int{}
	}
	if rep.WalkInsOpenBy, err = r.walkInsOpen(ctx); err != nil {
		return nil, err
	}
	for _, n := range rep.WalkInsOpenBy {
		rep.WalkInsOpen += n
	}
	r.serverMu.Lock()
	crashes := slices.Clone(r.crashWindows)
	for _, c := range r.crashes {
		if c.BarcodeInFlight > 0 {
			rep.CrashesMidLoop++
		}
	}
	r.serverMu.Unlock()
	r.posMu.Lock()
	killed := maps.Clone(r.killedMidLoop)
	r.posMu.Unlock()
	r.barcodeMu.Lock()
	records := slices.Clone(r.barcodes)
	r.barcodeMu.Unlock()
	lat := map[string][]time.Duration{}
	for _, rec := range records {
		row := rep.Rows[rec.Plan.Row()]
		if row.Answers == nil {
			row.Answers = map[string]int{}
		}
		rep.Buyers++
		row.Buyers++
		if rec.Plan.WalkIn {
			rep.WalkIn++
		} else {
			rep.Orders++
		}
		row.Answers[rec.Answer]++
		if rec.Err != "" {
			if rep.Errors == nil {
				rep.Errors = map[string]int{}
			}
			rep.Errors[rec.Plan.Row()+" "+rec.Plan.Kind()+" "+rec.Err]++
		}
		switch rec.Answer {
		case string(orderpay.BarcodePaid), string(orderpay.BarcodeRefused), string(orderpay.BarcodeCancelled):
			lat[rec.Plan.Row()] = append(lat[rec.Plan.Row()], rec.Final.Sub(rec.Scan))
		}
		if rec.Polled {
			row.Polled++
		}
		if killed[rec.Index] {
			row.Killed++
			rep.KilledMidLoop++
		}
		if e, ok := ends[rec.Key]; ok && !e.Ended.IsZero() && !e.Ended.Before(loopEnd(e.Created, r.settings.PosWait, crashes)) {
			row.SafetyNet++
		}
		rep.Rows[rec.Plan.Row()] = row
	}
	for k, ds := range lat {
		row := rep.Rows[k]
		row.ScanToAnswerMS = summarize(ds)
		rep.Rows[k] = row
	}
	return rep, nil
}

// walkInsOpen counts the walk-in sales still OPEN by their till's first final answer.
func (r *runner) walkInsOpen(ctx context.Context) (map[string]int, error) {
	rows, err := r.store.DB().QueryContext(ctx, `SELECT COALESCE(t.answer, ''), COUNT(*) FROM app_payments ap
		LEFT JOIN till_payments t ON t.app_payment_no = ap.payment_no
		WHERE ap.status = 'OPEN' AND ap.merchant_order_no LIKE 'pos-%' GROUP BY COALESCE(t.answer, '')`)
	if err != nil {
		return nil, fmt.Errorf("chaos: walk-in sales: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var answer string
		var n int
		if err := rows.Scan(&answer, &n); err != nil {
			return nil, err
		}
		out[cmp.Or(answer, "none")] += n
	}
	return out, rows.Err()
}

// loopEnd is when the payment center's loop of an attempt made at created was over: its
// wait passed, or the server running it was killed first.
func loopEnd(created time.Time, wait time.Duration, crashes []crashWindow) time.Time {
	end := created.Add(wait)
	for _, c := range crashes {
		if c.From.After(created) && c.From.Before(end) {
			end = c.From
		}
	}
	return end
}

// printBarcode writes the barcode table.
func printBarcode(w io.Writer, b *BarcodeReport) {
	if b == nil || b.Buyers == 0 {
		return
	}
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("\nbarcode payments at the till (--pos-wait %s, WeChat USERPAYING %s, both wall time): %d buyers (%d walk-in sales, %d shop orders); %d sales in flight at a kill, over %d kills\n",
		b.PosWait, b.WechatUserPayingFor, b.Buyers, b.WalkIn, b.Orders, b.KilledMidLoop, b.CrashesMidLoop)
	p("  till's final answer, scan → final answer (ms), ended by the safety net (after the loop was over):\n")
	p("  %-22s %6s %5s %7s %9s %7s %5s %9s %9s %9s %6s %6s %6s\n", "channel:behaviour", "buyers", "PAID", "REFUSED", "CANCELLED", "UNKNOWN", "error",
		"p50", "p99", "max", "safety", "polled", "killed")
	for _, k := range barcodeRows() {
		row, ok := b.Rows[k]
		if !ok {
			continue
		}
		a := row.Answers
		errs := a[answerError] + a[answerNoOrder]
		l := row.ScanToAnswerMS
		p("  %-22s %6d %5d %7d %9d %7d %5d %9.1f %9.1f %9.1f %6d %6d %6d\n", k, row.Buyers, a[string(orderpay.BarcodePaid)],
			a[string(orderpay.BarcodeRefused)], a[string(orderpay.BarcodeCancelled)], a[string(orderpay.BarcodeUnknown)], errs,
			l.P50, l.P99, l.Max, row.SafetyNet, row.Polled, row.Killed)
	}
	for _, k := range slices.Sorted(maps.Keys(b.Errors)) {
		p("  no answer for the till: %d × %s\n", b.Errors[k], k)
	}
	p("  the till payments' first final answers in the database: %s", joinCounts(b.TillAnswers, "  "))
	if b.WalkInsOpen > 0 {
		p("; walk-in sales still OPEN although their trade ended (none: the till never asked again), by their till's answer: %s",
			joinCounts(b.WalkInsOpenBy, "  "))
	}
	p("\n")
}

// barcodeCrashNote is the crash log's mention of the tills' requests a kill met.
func barcodeCrashNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", %d till request%s in flight", n, map[bool]string{true: "", false: "s"}[n == 1])
}
