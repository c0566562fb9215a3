package chaos

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"orderpay"
)

// Where a run's server settings come from (Config.Settings, `orderpay chaos --settings`).
const (
	// SettingsDrawn draws the settings from the run's seed, across the whole range of each
	// (DrawSettings): the default, so that every seed runs the server at other settings and
	// a defect that sits at one edge of a range is met by some seed.
	SettingsDrawn = "drawn"
	// SettingsFixed runs every seed at the same settings (FixedSettings): the usual pay
	// windows, Config.CloseGrace, a compressed refund retry plan and one stock policy per
	// SKU, as every run had before the settings were drawn.
	SettingsFixed = "fixed"
)

// The ranges DrawSettings draws from, in business time. Each is what a run can exercise
// within minutes at the default time scale: every deadline, close grace and refund retry
// window passes within the run, and so do the retention floors they make.
const (
	// minPayWindow and maxPayWindow bound the pay windows of every product type. The
	// buyers order fast and special goods; normal goods are never ordered, but their window
	// enters the retention floors as the longest, so it is kept as short as the others.
	// The shortest is 4 minutes, 4 s of wall time at the default time scale: with 2 (2 s),
	// a loaded machine's buyers met their deadlines before they could pay, and a way to pay
	// went through a run without one payment (the explorer's edge profile keeps 2 minutes).
	minPayWindow, maxPayWindow = 4 * time.Minute, 30 * time.Minute
	// minCloseGrace and maxCloseGrace bound the close grace.
	minCloseGrace, maxCloseGrace = time.Second, 2 * time.Minute
	// The refund retry plan: 1 to maxRetryWaits waits, each in [minRetryWait, maxRetryWait],
	// then every [minRetryEvery, maxRetryEvery], for [the first wait, maxRetryFor] (the window
	// must hold the first try, orderpay.RefundRetryPlan.Validate). A refund the channel
	// keeps refusing reaches the operators' queue within maxRetryFor and a wait.
	maxRetryWaits                = 4
	minRetryWait, maxRetryWait   = 20 * time.Second, 3 * time.Minute
	minRetryEvery, maxRetryEvery = time.Minute, 5 * time.Minute
	maxRetryFor                  = 15 * time.Minute
	// retentionInterval is how often the server's own retention pass runs (serve's
	// --retention-interval, business time: 0.5 s at the default time scale).
	retentionInterval = 30 * time.Second
	// minPosWait and maxPosWait bound the till's wait (serve's --pos-wait): from the lowest
	// the server takes (20 s, where the loop's reverse has 5 s to end the trade and WeChat
	// refuses a reverse within 15 s of the order) to the default, 35 s. It is wall time: the
	// barcode loop is never compressed by --time-scale, so a longer wait would only make the
	// run longer.
	minPosWait, maxPosWait = orderpay.BarcodeBoundMin, orderpay.BarcodeBoundDefault
	// settingsStream is the PCG stream of the settings' draws: the seed is the run's, and
	// no other draw of a run uses this stream (the buyers use their index, the crash
	// moments math.MaxUint64, the after-sales scripts the order number's hash).
	settingsStream = 0x5e771e6d5e771e6d
)

// stockPolicies are the stock policies a SKU of a run may have (docs/design.md §6).
var stockPolicies = []string{string(orderpay.StockAtOrder), string(orderpay.StockAtPayment), string(orderpay.StockReserve)}

// Settings are the server's settings in one run, every one of which is passed to `orderpay
// serve` (ServerArgs) or to the catalogue it is given, in business time. The buyers, the
// crash moments and the settle phases time themselves by them.
type Settings struct {
	// Source is SettingsDrawn or SettingsFixed.
	Source string
	// PayWindows is every product type's window (--pay-windows).
	PayWindows orderpay.PayWindows
	// CloseGrace is how long after a deadline the timeout close starts (--close-grace).
	CloseGrace time.Duration
	// RefundRetry is the plan of a refund refused for now (--refund-retry-schedule, -every,
	// -for).
	RefundRetry orderpay.RefundRetryPlan
	// SKUs are the catalogue's SKUs, in catalogue order, with their stock policies.
	SKUs []SKUSettings
	// Retention is the retention periods (--retain-logs, --retain-published, --retain-raw):
	// their floors (orderpay.RetentionNeeds.Floors) of the settings above.
	Retention orderpay.RetentionPolicy
	// RetentionInterval is how often the server's own retention pass runs
	// (--retention-interval).
	RetentionInterval time.Duration
	// PosWait is how long a till's barcode payment waits for its buyer before the trade is
	// ended at the channel and the till answered (--pos-wait). Unlike every other setting it
	// is wall time: the server never compresses it.
	PosWait time.Duration
}

// SKUSettings is one SKU of the catalogue as a run sets it up.
type SKUSettings struct {
	Name        string // the SKU's code in the run is the run's id, a dash and this
	ProductType string // whose pay window its orders get
	Price       int64  // fen
	StockPolicy string // order, payment or reserve
	// ReserveMinutes is a reserve SKU's hold, in whole business minutes (≥ 1); 0 otherwise.
	ReserveMinutes int64
}

// SettingsFor are the settings cfg's run uses: drawn from its seed, or fixed.
func SettingsFor(cfg Config) Settings {
	if cfg.Settings == SettingsFixed {
		return FixedSettings(cfg.CloseGrace)
	}
	return DrawSettings(cfg.Seed)
}

// FixedSettings are the settings every run had before they were drawn: the usual pay
// windows (normal 3 days, special offers 30 minutes, fast-moving goods 15 minutes), the
// close grace given, a refund retry plan of 1 min, 2 min and 4 min, then every 4 min for
// 10 min, and the catalogue's own stock policies (the mooncakes held 5 minutes). The
// retention periods are at their floors too, which at a 3-day window remove nothing within
// a run.
func FixedSettings(closeGrace time.Duration) Settings {
	s := Settings{Source: SettingsFixed, PayWindows: maps.Clone(orderpay.DefaultPayWindows), CloseGrace: closeGrace,
		RefundRetry: orderpay.RefundRetryPlan{Schedule: []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute},
			Every: 4 * time.Minute, For: 10 * time.Minute},
		RetentionInterval: retentionInterval, PosWait: orderpay.BarcodeBoundDefault}
	for _, item := range catalogue {
		s.SKUs = append(s.SKUs, SKUSettings{Name: item.name, ProductType: item.productType, Price: item.price,
			StockPolicy: item.stockPolicy, ReserveMinutes: item.reserveMinutes})
	}
	s.Retention = s.Needs().Floors()
	return s
}

// DrawSettings draws a run's settings from its seed: the same seed always draws the same
// settings, and every setting is drawn across its whole range (the constants above). Each
// value is its range's lower end one time in six, its upper end one time in six, and
// otherwise uniform over the range, so that the edges, where a setting is most likely to
// break something, come up every few seeds. Every stock policy is on at least one SKU,
// and a reserve SKU holds its units at least a minute and at most its window. The
// retention periods are their floors. The till's wait is drawn last, so that the draws
// before it are what they were before it was drawn.
func DrawSettings(seed uint64) Settings {
	rng := rand.New(rand.NewPCG(seed, settingsStream))
	s := Settings{Source: SettingsDrawn, PayWindows: orderpay.PayWindows{}, RetentionInterval: retentionInterval}
	// Fixed order of the draws: a map's order would change them from run to run.
	for _, t := range []orderpay.ProductType{orderpay.ProductNormal, orderpay.ProductSpecial, orderpay.ProductFast} {
		s.PayWindows[t] = drawDuration(rng, minPayWindow, maxPayWindow, time.Second)
	}
	s.CloseGrace = drawDuration(rng, minCloseGrace, maxCloseGrace, time.Millisecond)
	waits := 1 + rng.IntN(maxRetryWaits)
	for range waits {
		s.RefundRetry.Schedule = append(s.RefundRetry.Schedule, drawDuration(rng, minRetryWait, maxRetryWait, time.Second))
	}
	s.RefundRetry.Every = drawDuration(rng, minRetryEvery, maxRetryEvery, time.Second)
	s.RefundRetry.For = drawDuration(rng, s.RefundRetry.Schedule[0], maxRetryFor, time.Second)

	// Three SKUs at random take one policy each, the rest any policy.
	policies := make([]string, len(catalogue))
	order := rng.Perm(len(catalogue))
	for i, c := range order {
		if i < len(stockPolicies) {
			policies[c] = stockPolicies[i]
		} else {
			policies[c] = stockPolicies[rng.IntN(len(stockPolicies))]
		}
	}
	for i, item := range catalogue {
		sku := SKUSettings{Name: item.name, ProductType: item.productType, Price: item.price, StockPolicy: policies[i]}
		if sku.StockPolicy == string(orderpay.StockReserve) {
			most := int64(s.PayWindows[orderpay.ProductType(item.productType)] / time.Minute)
			sku.ReserveMinutes = drawInt(rng, 1, most)
		}
		s.SKUs = append(s.SKUs, sku)
	}
	s.Retention = s.Needs().Floors()
	s.PosWait = drawDuration(rng, minPosWait, maxPosWait, time.Second)
	return s
}

// drawDuration draws a duration in [lo, hi] in whole steps: lo one time in six, hi one
// time in six, else uniformly.
func drawDuration(rng *rand.Rand, lo, hi, step time.Duration) time.Duration {
	return lo + time.Duration(drawInt(rng, 0, int64((hi-lo)/step)))*step
}

// drawInt draws an integer in [lo, hi]: lo one time in six, hi one time in six, else
// uniformly.
func drawInt(rng *rand.Rand, lo, hi int64) int64 {
	if hi <= lo {
		return lo
	}
	switch rng.IntN(6) {
	case 0:
		return lo
	case 1:
		return hi
	}
	return lo + rng.Int64N(hi-lo+1)
}

// Needs is what in the settings decides the retention floors.
func (s Settings) Needs() orderpay.RetentionNeeds {
	return orderpay.RetentionNeeds{PayWindows: s.PayWindows, CloseGrace: s.CloseGrace, RefundRetryFor: s.RefundRetry.For}
}

// window is the pay window of a product type (the fast goods' for one the settings do not
// know).
func (s Settings) window(productType string) time.Duration {
	if w, ok := s.PayWindows[orderpay.ProductType(productType)]; ok {
		return w
	}
	return s.PayWindows[orderpay.ProductFast]
}

// appWindow is the deadline of an app payment in a run: the fast goods' window.
func (s Settings) appWindow() time.Duration { return s.window(string(orderpay.ProductFast)) }

// loadWindow is the longest pay window of what the buyers pay for: the catalogue's
// product types and the app payments. Crashes are spread over it, and the settle phase
// waits for it.
func (s Settings) loadWindow() time.Duration {
	longest := s.appWindow()
	for _, sku := range s.SKUs {
		longest = max(longest, s.window(sku.ProductType))
	}
	return longest
}

// longestRetryWait is the longest wait of the refund retry plan: the schedule's and the
// fixed one after it.
func (s Settings) longestRetryWait() time.Duration {
	longest := s.RefundRetry.Every
	for _, d := range s.RefundRetry.Schedule {
		longest = max(longest, d)
	}
	return longest
}

// windowsArg is --pay-windows: every product type, sorted.
func (s Settings) windowsArg() string {
	var parts []string
	for _, t := range slices.Sorted(maps.Keys(s.PayWindows)) {
		parts = append(parts, string(t)+"="+s.PayWindows[t].String())
	}
	return strings.Join(parts, ",")
}

// ServerArgs are the flags of `orderpay serve` that carry the settings, all of them in
// business time (the server divides them by its --time-scale) but --pos-wait, which is wall
// time. The catalogue's stock policies go to the server through the admin API instead (POST
// /admin/skus).
func (s Settings) ServerArgs() []string {
	return []string{
		"--pay-windows", s.windowsArg(),
		"--close-grace", s.CloseGrace.String(),
		"--refund-retry-schedule", s.RefundRetry.String(),
		"--refund-retry-every", s.RefundRetry.Every.String(),
		"--refund-retry-for", s.RefundRetry.For.String(),
		"--retain-logs", s.Retention.Logs.String(),
		"--retain-published", s.Retention.Published.String(),
		"--retain-raw", s.Retention.RawBodies.String(),
		"--retention-interval", s.RetentionInterval.String(),
		"--pos-wait", s.PosWait.String(),
	}
}

// SettingsView is the settings as the report shows them: every duration as serve's flag
// takes it (business time).
type SettingsView struct {
	Source              string            `json:"source"` // drawn or fixed
	PayWindows          map[string]string `json:"pay_windows"`
	CloseGrace          string            `json:"close_grace"`
	RefundRetrySchedule string            `json:"refund_retry_schedule"`
	RefundRetryEvery    string            `json:"refund_retry_every"`
	RefundRetryFor      string            `json:"refund_retry_for"`
	RetainLogs          string            `json:"retain_logs"`
	RetainPublished     string            `json:"retain_published"`
	RetainRaw           string            `json:"retain_raw"`
	RetentionInterval   string            `json:"retention_interval"`
	PosWait             string            `json:"pos_wait"` // wall time
	// SKUs are the catalogue's SKUs with their stock policies, in catalogue order.
	SKUs []SKUSettingsView `json:"skus"`
	// ServerArgs are the flags that carried the settings to `orderpay serve`, as passed.
	ServerArgs []string `json:"server_args"`
}

// SKUSettingsView is one SKU in the report.
type SKUSettingsView struct {
	SKU            string `json:"sku"`
	ProductType    string `json:"product_type"`
	StockPolicy    string `json:"stock_policy"`
	ReserveMinutes int64  `json:"reserve_minutes,omitempty"`
}

// View is the settings for the report.
func (s Settings) View() SettingsView {
	v := SettingsView{Source: s.Source, PayWindows: map[string]string{}, CloseGrace: s.CloseGrace.String(),
		RefundRetrySchedule: s.RefundRetry.String(), RefundRetryEvery: s.RefundRetry.Every.String(), RefundRetryFor: s.RefundRetry.For.String(),
		RetainLogs: s.Retention.Logs.String(), RetainPublished: s.Retention.Published.String(), RetainRaw: s.Retention.RawBodies.String(),
		RetentionInterval: s.RetentionInterval.String(), PosWait: s.PosWait.String(), SKUs: []SKUSettingsView{}, ServerArgs: s.ServerArgs()}
	for t, w := range s.PayWindows {
		v.PayWindows[string(t)] = w.String()
	}
	for _, sku := range s.SKUs {
		v.SKUs = append(v.SKUs, SKUSettingsView{SKU: sku.Name, ProductType: sku.ProductType, StockPolicy: sku.StockPolicy, ReserveMinutes: sku.ReserveMinutes})
	}
	return v
}

// lines are the settings for the report's table: the server's flags, then the SKUs.
func (v SettingsView) lines() []string {
	var skus []string
	for _, sku := range v.SKUs {
		s := fmt.Sprintf("%s (%s) %s", sku.SKU, sku.ProductType, sku.StockPolicy)
		if sku.ReserveMinutes > 0 {
			s += " " + strconv.FormatInt(sku.ReserveMinutes, 10) + " min"
		}
		skus = append(skus, s)
	}
	return []string{
		fmt.Sprintf("pay windows %s; close grace %s; refund retries after %s, then every %s, for %s",
			joinMap(v.PayWindows, ", "), v.CloseGrace, v.RefundRetrySchedule, v.RefundRetryEvery, v.RefundRetryFor),
		fmt.Sprintf("retention at its floors: logs %s, published %s, raw bodies %s; a pass every %s",
			v.RetainLogs, v.RetainPublished, v.RetainRaw, v.RetentionInterval),
		"stock policies: " + strings.Join(skus, ", "),
		fmt.Sprintf("the till's wait (--pos-wait, wall time, not compressed): %s", v.PosWait),
	}
}
