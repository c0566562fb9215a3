package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"orderpay/sqlstore"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The flash-sale benchmark: one SKU with Units units, Buyers buyers all at once
// through the HTTP API of a real server; exactly Units orders must be created and Units
// units locked, none oversold. Beside it, the naive read-then-write deduction that oversells
// (库存超卖), run by as many concurrent buyers against a one-row table in the
// same database, shows the oversell the conditional update prevents.

// Defaults of FlashConfig.
const (
	DefaultFlashBuyers  = 5000
	DefaultFlashUnits   = 1000
	DefaultFlashBuckets = 16
	// DefaultNaiveThink is the time the naive baseline spends between its read and its
	// write: the work an application does between checking the count and writing it back
	// (building the order, calling another service). Without it the race still exists, but
	// whether a run shows it depends on how the scheduler happens to interleave the buyers.
	DefaultNaiveThink = time.Millisecond
)

// FlashConfig is one flash-sale run. Zero fields take the defaults.
type FlashConfig struct {
	Buyers  int    // concurrent buyers, one order of one unit each; 5000
	Units   int    // the SKU's stock; 1000
	Buckets int    // rows the SKU's stock is split over; 16
	DB      string // postgres:// DSN; "" is SQLite in a temp dir
	Binary  string // the orderpay binary to run as the server; "" is this one
	Logger  *slog.Logger
	// NaiveThink is the naive baseline's pause between read and write; 1 ms.
	NaiveThink time.Duration
	// SKUs, above 1, runs the same units and buyers once more spread over that many SKUs
	// (each with its share of the units, split over Buckets rows), so that the hot SKU's
	// throughput is measured against the spread one in the same run.
	SKUs int
}

// FlashReport is what a run measured.
type FlashReport struct {
	Store   string `json:"store"`
	Buyers  int    `json:"buyers"`
	Units   int    `json:"units"`
	Buckets int    `json:"buckets"`

	Created    int            `json:"created"`     // 201 answers
	SoldOut    int            `json:"sold_out"`    // 409 EOUTOFSTOCK answers
	OtherError map[string]int `json:"other_error"` // anything else, by error key
	Seconds    float64        `json:"seconds"`     // from the first request to the last answer
	// OrdersPerSecond is Created / Seconds; RequestsPerSecond is Buyers / Seconds.
	OrdersPerSecond   float64 `json:"orders_per_second"`
	RequestsPerSecond float64 `json:"requests_per_second"`
	LatencyP50MS      float64 `json:"latency_p50_ms"`
	LatencyP99MS      float64 `json:"latency_p99_ms"`
	// The SKU's stock and orders afterwards, from the database.
	Available int64 `json:"available"`
	Locked    int64 `json:"locked"`
	Orders    int   `json:"orders_in_db"`

	// The naive baseline: as many buyers, each reading the count and writing it back less
	// one (no condition), against a one-row table holding Units.
	NaiveSold      int     `json:"naive_sold"`        // buyers told they got a unit
	NaiveLeft      int64   `json:"naive_left"`        // the count afterwards
	NaiveOversold  int     `json:"naive_oversold"`    // NaiveSold − Units, if positive
	NaiveLostWrite int64   `json:"naive_lost_writes"` // NaiveSold − (Units − NaiveLeft): decrements overwritten
	NaiveSeconds   float64 `json:"naive_seconds"`
	NaiveThinkMS   float64 `json:"naive_think_ms"`

	// The spread run (SKUs > 1): the same buyers over SKUs SKUs.
	SKUs                  int     `json:"skus,omitempty"`
	SpreadCreated         int     `json:"spread_created,omitempty"`
	SpreadOversold        int     `json:"spread_oversold,omitempty"` // orders beyond a SKU's units, summed
	SpreadOrdersPerSecond float64 `json:"spread_orders_per_second,omitempty"`
	// HotOverSpread is OrdersPerSecond / SpreadOrdersPerSecond: how much of the spread
	// throughput one hot SKU keeps.
	HotOverSpread float64 `json:"hot_over_spread,omitempty"`
}

// Pass reports whether exactly Units were sold through orderpay, and none oversold, in the
// hot run and in the spread one.
func (r *FlashReport) Pass() bool {
	hot := r.Created == r.Units && r.Orders == r.Units && r.Locked == int64(r.Units) && r.Available == 0 && len(r.OtherError) == 0
	return hot && (r.SKUs <= 1 || (r.SpreadCreated == r.Units && r.SpreadOversold == 0))
}

// storm sends one order of one unit per buyer, all at once, buyer i ordering skus[i%len];
// it returns how many were created and sold out, the other errors, how long it took and
// every order's latency.
func storm(ctx context.Context, fc *Client, runID string, skus []string, buyers int) (created, soldOut int, other map[string]int,
	elapsed time.Duration, lat []time.Duration) {
	var c, so atomic.Int64
	var mu sync.Mutex
	other = map[string]int{}
	lat = make([]time.Duration, 0, buyers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range buyers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			t0 := time.Now()
			buyer := fmt.Sprintf("%s-buyer-%d-%d", runID, len(skus), i)
			_, err := fc.As(buyer).CreateOrder(ctx, buyer, "", Item{SKU: skus[i%len(skus)], Qty: 1})
			d := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			lat = append(lat, d)
			var apiErr *APIError
			switch {
			case err == nil:
				c.Add(1)
			case errors.As(err, &apiErr) && apiErr.Code == "EOUTOFSTOCK":
				so.Add(1)
			default:
				other[ErrorKey(err)]++
			}
		}()
	}
	began := time.Now()
	close(start)
	wg.Wait()
	return int(c.Load()), int(so.Load()), other, time.Since(began), lat
}

// FlashBench runs the flash sale and the naive baseline.
func FlashBench(ctx context.Context, cfg FlashConfig) (*FlashReport, error) {
	cfg.Buyers = cmp.Or(cfg.Buyers, DefaultFlashBuyers)
	cfg.Units = cmp.Or(cfg.Units, DefaultFlashUnits)
	cfg.Buckets = cmp.Or(cfg.Buckets, DefaultFlashBuckets)
	cfg.NaiveThink = cmp.Or(cfg.NaiveThink, DefaultNaiveThink)
	if cfg.Buyers < 1 || cfg.Units < 1 || cfg.Buckets < 1 || cfg.Buckets > 256 {
		return nil, errors.New("flash bench: buyers and units must be positive, buckets 1-256")
	}
	e, err := startEnv(ctx, envConfig{Binary: cfg.Binary, DB: cfg.DB, Prefix: "orderpay-flash-", TimeScale: 1,
		LogLevel: "warn", Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	defer e.close()
	rep := &FlashReport{Store: e.store.Dialect(), Buyers: cfg.Buyers, Units: cfg.Units, Buckets: cfg.Buckets, OtherError: map[string]int{}}
	sku := e.runID + "-flash"
	c := e.client
	if err := c.Call(ctx, http.MethodPost, c.API+"/admin/skus", http.Header{"Authorization": {"Bearer " + c.AdminToken}},
		map[string]any{"sku": sku, "merchant_id": "m-flash", "title": "Flash sale " + sku, "price": 990, "stock": cfg.Units,
			"product_type": "fast", "stock_policy": "order", "stock_buckets": cfg.Buckets}, nil); err != nil {
		return nil, err
	}
	// Every buyer gets its own connection, so that all are in flight at once.
	hc := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Buyers, IdleConnTimeout: 30 * time.Second}}
	defer hc.CloseIdleConnections()
	fc := *c
	fc.HTTP, fc.RetryFor = hc, 0

	created, soldOut, other, elapsed, lat := storm(ctx, &fc, e.runID, []string{sku}, cfg.Buyers)
	rep.Created, rep.SoldOut, rep.OtherError = created, soldOut, other
	rep.Seconds = round3(elapsed.Seconds())
	rep.OrdersPerSecond = round1(float64(rep.Created) / elapsed.Seconds())
	rep.RequestsPerSecond = round1(float64(cfg.Buyers) / elapsed.Seconds())
	slices.Sort(lat)
	rep.LatencyP50MS, rep.LatencyP99MS = ms(Percentile(lat, 50)), ms(Percentile(lat, 99))

	st, err := e.store.Stock(ctx, sku)
	if err != nil {
		return nil, err
	}
	rep.Available, rep.Locked = st.Available, st.Locked
	if err := e.store.DB().QueryRowContext(ctx, e.store.Rebind(`SELECT COUNT(DISTINCT order_no) FROM order_items WHERE sku = ?`), sku).Scan(&rep.Orders); err != nil {
		return nil, err
	}
	if cfg.SKUs > 1 {
		if err := spreadRun(ctx, e, &fc, c, rep, cfg); err != nil {
			return nil, fmt.Errorf("flash bench: spread run: %w", err)
		}
	}
	if err := naiveBaseline(ctx, e.store, rep, e.runID, cfg.NaiveThink); err != nil {
		return nil, fmt.Errorf("flash bench: naive baseline: %w", err)
	}
	return rep, nil
}

// spreadRun sends the same buyers once more, over cfg.SKUs SKUs sharing the units, and
// records the spread throughput and any oversell.
func spreadRun(ctx context.Context, e *env, fc, admin *Client, rep *FlashReport, cfg FlashConfig) error {
	rep.SKUs = cfg.SKUs
	skus := make([]string, cfg.SKUs)
	units := make([]int, cfg.SKUs)
	for i := range skus {
		skus[i] = fmt.Sprintf("%s-spread-%d", e.runID, i)
		units[i] = cfg.Units/cfg.SKUs + boolInt(i < cfg.Units%cfg.SKUs)
		if units[i] == 0 {
			continue
		}
		if err := admin.Call(ctx, http.MethodPost, admin.API+"/admin/skus", http.Header{"Authorization": {"Bearer " + admin.AdminToken}},
			map[string]any{"sku": skus[i], "merchant_id": "m-flash", "title": "Spread sale " + skus[i], "price": 990, "stock": units[i],
				"product_type": "fast", "stock_policy": "order", "stock_buckets": min(cfg.Buckets, units[i])}, nil); err != nil {
			return err
		}
	}
	created, _, _, elapsed, _ := storm(ctx, fc, e.runID, skus, cfg.Buyers)
	rep.SpreadCreated = created
	rep.SpreadOrdersPerSecond = round1(float64(created) / elapsed.Seconds())
	if rep.SpreadOrdersPerSecond > 0 {
		rep.HotOverSpread = round3(rep.OrdersPerSecond / rep.SpreadOrdersPerSecond)
	}
	for i, sku := range skus {
		if units[i] == 0 {
			continue
		}
		var n int
		if err := e.store.DB().QueryRowContext(ctx, e.store.Rebind(`SELECT COUNT(DISTINCT order_no) FROM order_items WHERE sku = ?`), sku).Scan(&n); err != nil {
			return err
		}
		rep.SpreadOversold += max(n-units[i], 0)
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// naiveBaseline is the deduction that oversells (库存超卖): read the count, check it, write it
// back less one, in two statements with nothing tying them together and think between them.
func naiveBaseline(ctx context.Context, store *sqlstore.Store, rep *FlashReport, runID string, think time.Duration) error {
	db := store.DB()
	table := "flash_naive_" + runID
	if _, err := db.ExecContext(ctx, `CREATE TABLE `+table+` (id INTEGER PRIMARY KEY, available BIGINT NOT NULL)`); err != nil {
		return err
	}
	defer db.ExecContext(context.WithoutCancel(ctx), `DROP TABLE `+table)
	if _, err := db.ExecContext(ctx, store.Rebind(`INSERT INTO `+table+` (id, available) VALUES (1, ?)`), rep.Units); err != nil {
		return err
	}
	read, write := `SELECT available FROM `+table+` WHERE id = 1`, store.Rebind(`UPDATE `+table+` SET available = ? WHERE id = 1`)
	var sold atomic.Int64
	var firstErr error
	var mu sync.Mutex
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range rep.Buyers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			var n int64
			err := db.QueryRowContext(ctx, read).Scan(&n)
			if err == nil && n > 0 {
				time.Sleep(think)
				if _, err = db.ExecContext(ctx, write, n-1); err == nil {
					sold.Add(1)
				}
			}
			if err != nil {
				mu.Lock()
				firstErr = cmp.Or(firstErr, err)
				mu.Unlock()
			}
		}()
	}
	began := time.Now()
	close(start)
	wg.Wait()
	rep.NaiveSeconds = round3(time.Since(began).Seconds())
	if firstErr != nil {
		return firstErr
	}
	if err := db.QueryRowContext(ctx, read).Scan(&rep.NaiveLeft); err != nil {
		return err
	}
	rep.NaiveSold = int(sold.Load())
	rep.NaiveThinkMS = ms(think)
	rep.NaiveOversold = max(rep.NaiveSold-rep.Units, 0)
	rep.NaiveLostWrite = int64(rep.NaiveSold) - (int64(rep.Units) - rep.NaiveLeft)
	return nil
}

// PrintFlash writes the report as text.
func PrintFlash(w io.Writer, r *FlashReport) {
	verdict := "PASS"
	if !r.Pass() {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "flash sale: 1 SKU, %d units in %d stock rows, %d buyers at once through the HTTP API; store %s\n", r.Units, r.Buckets, r.Buyers, r.Store)
	fmt.Fprintf(w, "  orderpay:  %d orders created, %d sold out (409), %d other errors %v; %.2f s\n", r.Created, r.SoldOut, sumMap(r.OtherError), r.OtherError, r.Seconds)
	fmt.Fprintf(w, "             %.1f orders/s, %.1f requests/s, latency p50 %.1f ms p99 %.1f ms\n", r.OrdersPerSecond, r.RequestsPerSecond, r.LatencyP50MS, r.LatencyP99MS)
	fmt.Fprintf(w, "             stock afterwards: available %d, locked %d; %d orders hold the SKU: %s\n", r.Available, r.Locked, r.Orders, verdict)
	if r.SKUs > 1 {
		fmt.Fprintf(w, "  spread:    the same buyers over %d SKUs sharing the units: %d orders created, %d oversold; %.1f orders/s; hot ÷ spread %.2f\n",
			r.SKUs, r.SpreadCreated, r.SpreadOversold, r.SpreadOrdersPerSecond, r.HotOverSpread)
	}
	fmt.Fprintf(w, "  naive read-then-write (%.0f ms between them), %d buyers on one row of %d: %d told they got a unit, %d left, %d oversold, %d decrements lost; %.2f s\n",
		r.NaiveThinkMS, r.Buyers, r.Units, r.NaiveSold, r.NaiveLeft, r.NaiveOversold, r.NaiveLostWrite, r.NaiveSeconds)
}

func sumMap(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
