package chaos

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// loadStats is what the buyers report while the load runs. It is safe for concurrent use.
type loadStats struct {
	launched atomic.Int64 // buyers started
	done     atomic.Int64 // buyers whose script (not their watching) is over
	orders   atomic.Int64 // orders created
	paid     atomic.Int64 // payments the wallet accepted
	errors   atomic.Int64 // API errors, every attempt
	// forgedVerified counts the forged returns the server said verified (it must never).
	forgedVerified atomic.Int64

	mu          sync.Mutex
	firstCreate time.Time
	lastCreate  time.Time
	// lastPosScan is when the last till's sale began (barcode.go): the settle phase waits
	// for its trade to end.
	lastPosScan time.Time
	apiErrors   map[string]int // "<call> <status> <code>"
	outcomes    map[string]int
	seenPaidLat []time.Duration // wallet payment → a watcher sees PAID
	// walletPaidAt is, per out_trade_no the wallet paid, when the wallet call began.
	walletPaidAt map[string]time.Time
	// unpaid are the orders whose buyers never pay (unpaidBehaviours), with the behaviour.
	unpaid map[string]Behaviour
}

func newLoadStats() *loadStats {
	return &loadStats{apiErrors: map[string]int{}, outcomes: map[string]int{}, walletPaidAt: map[string]time.Time{},
		unpaid: map[string]Behaviour{}}
}

// unpaidOrder records an order whose buyer never pays it (unpaidBehaviours).
func (s *loadStats) unpaidOrder(orderNo string, b Behaviour) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unpaid[orderNo] = b
}

func (s *loadStats) created(at time.Time) {
	s.orders.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.firstCreate.IsZero() || at.Before(s.firstCreate) {
		s.firstCreate = at
	}
	if at.After(s.lastCreate) {
		s.lastCreate = at
	}
}

func (s *loadStats) posScanned(at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if at.After(s.lastPosScan) {
		s.lastPosScan = at
	}
}

func (s *loadStats) apiError(call string, err error) {
	s.errors.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.apiErrors[call+" "+ErrorKey(err)]++
}

func (s *loadStats) outcome(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outcomes[what]++
}

func (s *loadStats) walletPaid(outTradeNo string, at time.Time) {
	s.paid.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.walletPaidAt[outTradeNo] = at
}

func (s *loadStats) seenPaid(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seenPaidLat = append(s.seenPaidLat, d)
}

// Percentile is the nearest-rank p-th percentile (0 < p ≤ 100) of sorted durations; 0 for
// none.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// Latency is a distribution summary in milliseconds.
type Latency struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

// summarize sorts ds and summarises them.
func summarize(ds []time.Duration) Latency {
	slices.Sort(ds)
	l := Latency{Count: len(ds), P50: ms(Percentile(ds, 50)), P99: ms(Percentile(ds, 99))}
	if len(ds) > 0 {
		l.Max = ms(ds[len(ds)-1])
	}
	return l
}

func ms(d time.Duration) float64 { return math.Round(float64(d.Microseconds())/100) / 10 }
