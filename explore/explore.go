// Package explore is the interleaving explorer (docs/explorer.md). It takes every ordered
// pair (A, B) of the catalogue's operations that can meet on one order, payment or app
// payment (a scene), runs A to each of its steps p, runs B to its end (or, at depth 2, to
// each of its own steps q), resumes A, lets the system settle, and checks the invariants
// I1–I9 and that every stored transition is one its machine allows. A case is named
// "scene/profile: A@p | B" and replays exactly, step by step, on one virtual clock.
package explore

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"orderpay"
	"orderpay/apppay"
	"orderpay/order"
	"orderpay/sqlstore"
)

// Profile is a configuration drawn from the edges of the allowed ranges.
type Profile struct {
	Name        string
	ProductType orderpay.ProductType
	Policy      orderpay.StockPolicy
	Price       int64 // fen
	PayWindows  orderpay.PayWindows
	CloseGrace  time.Duration
	RefundRetry orderpay.RefundRetryPlan
	// AutoApproveMax: refunds before shipping up to it are approved at once.
	AutoApproveMax int64
	// Retention is at its floors (RetentionNeeds.Floors): the shortest a shop may set.
	Retention      orderpay.RetentionPolicy
	ReserveMinutes int64
	// Stock is the SKU's units (1 unless set), spread over Buckets rows (1 unless set).
	Stock   int64
	Buckets int
}

func profile(name string, pt orderpay.ProductType, policy orderpay.StockPolicy, price int64, window, grace time.Duration) Profile {
	p := Profile{Name: name, ProductType: pt, Policy: policy, Price: price, CloseGrace: grace, RefundRetry: orderpay.DefaultRefundRetryPlan,
		AutoApproveMax: 1, PayWindows: orderpay.PayWindows{}}
	for t, d := range orderpay.DefaultPayWindows {
		p.PayWindows[t] = d
	}
	p.PayWindows[pt] = window
	p.Retention = orderpay.RetentionNeeds{PayWindows: p.PayWindows, CloseGrace: grace, RefundRetryFor: p.RefundRetry.For}.Floors()
	if policy == orderpay.StockReserve {
		p.ReserveMinutes = 1
	}
	return p
}

// Profiles are the configurations each case runs under. The first is CI's.
var Profiles = []Profile{
	// The usual: fast goods (15 minutes), stock locked at the order.
	profile("base", orderpay.ProductFast, orderpay.StockAtOrder, 1990, 15*time.Minute, 30*time.Second),
	// The shortest window and grace, stock deducted at payment, one fen, retention at its floor.
	profile("edge", orderpay.ProductSpecial, orderpay.StockAtPayment, 1, 2*time.Minute, time.Second),
	// A reserve hold of one minute, the longest window and grace.
	profile("reserve", orderpay.ProductNormal, orderpay.StockReserve, 2, 72*time.Hour, 2*time.Minute),
}

// ProfileNamed is the profile of that name.
func ProfileNamed(name string) (Profile, error) {
	for _, p := range Profiles {
		if p.Name == name {
			return p, nil
		}
	}
	return Profile{}, fmt.Errorf("no profile %q", name)
}

// fixture is what every case of a profile starts from: a SKU with one unit, and an app.
type fixture struct {
	SKU   string
	AppID string
}

// Case is one interleaving.
type Case struct {
	Scene   string
	Profile Profile
	A, B    *Op
	P       int // A runs to its p-th step, then B
	Q       int // depth 2: B runs to its q-th step, then A to its end, then B; 0 at depth 1
}

// Name is the case's name, which --case takes.
func (c Case) Name() string {
	if c.B == nil {
		return fmt.Sprintf("%s/%s: %s alone", c.Scene, c.Profile.Name, c.A.Name)
	}
	b := c.B.Name
	if c.Q > 0 {
		b += "@" + strconv.Itoa(c.Q)
	}
	return fmt.Sprintf("%s/%s: %s@%d | %s", c.Scene, c.Profile.Name, c.A.Name, c.P, b)
}

var caseName = regexp.MustCompile(`^\s*([a-z-]+)/([a-z]+):\s*(\S+)@(\d+)\s*\|\s*([^@\s]+)(?:@(\d+))?\s*$`)

// ParseCase reads a case's name.
func ParseCase(name string) (Case, error) {
	m := caseName.FindStringSubmatch(name)
	if m == nil {
		return Case{}, fmt.Errorf("%q is not a case name (scene/profile: A@p | B or A@p | B@q)", name)
	}
	var c Case
	var err error
	c.Scene = m[1]
	if !validScene(c.Scene) {
		return c, fmt.Errorf("no scene %q", c.Scene)
	}
	if c.Profile, err = ProfileNamed(m[2]); err != nil {
		return c, err
	}
	if c.A, err = OpNamed(m[3]); err != nil {
		return c, err
	}
	if c.B, err = OpNamed(m[5]); err != nil {
		return c, err
	}
	c.P, _ = strconv.Atoi(m[4])
	if m[6] != "" {
		c.Q, _ = strconv.Atoi(m[6])
	}
	return c, nil
}

func validScene(s string) bool {
	for _, x := range Scenes {
		if x == s {
			return true
		}
	}
	return false
}

// Result is what one case found.
type Result struct {
	Case     Case
	Trace    *Trace
	Failures []string
	// Steps are A's and B's steps in the case (A's solo count when probing).
	StepsA, StepsB int
	// Skipped: A ended before its p-th step, or B before its q-th (no such case).
	Skipped bool
}

// Failed reports whether the case broke something.
func (r *Result) Failed() bool { return len(r.Failures) > 0 }

// Explorer runs cases on one engine.
type Explorer struct {
	Engine string // "sqlite" or "postgres"
	// Dir holds the SQLite databases (sqlite); PG is an admin DSN of a PostgreSQL server on
	// which the explorer makes and drops databases of its own (postgres).
	Dir string
	PG  string

	admin *sql.DB // PostgreSQL: the server's admin connection
	// Progress, if set, is told after each case how many of how many ran.
	Progress func(done, total int)
	mu       sync.Mutex
	fixtures map[string]*templateDB // by profile
	probes   map[string]int         // solo steps by scene/profile/op
	seq      int
	caseDBs  []string // PostgreSQL: every case database made
}

type templateDB struct {
	once sync.Once
	dsn  string // SQLite: the file; PostgreSQL: the database's name
	fix  fixture
	err  error
	// PostgreSQL: what the template holds (its rows and where its sequences stand), and
	// the case databases made from it that no case uses now, each back as the template
	// left it (pgReset).
	snap *pgSnapshot
	free []*pgSlot
	// SQLite: the same, as SQL (sqliteSlot.reset), and the case databases free, each with its
	// store's connections open.
	sq    *sqliteSnapshot
	spare []*sqliteSlot
}

// Run runs c and checks what it left.
func (e *Explorer) Run(ctx context.Context, c Case) *Result {
	res := &Result{Case: c, Trace: &Trace{}}
	t := res.Trace
	t.add("case %s (%s)", c.Name(), e.Engine)
	w, cleanup, err := e.world(ctx, c)
	if err != nil {
		res.Failures = append(res.Failures, "fixture: "+err.Error())
		return res
	}
	defer cleanup()
	d := newDriver(t)
	d.tick = func() { w.Clock.Advance(time.Second) }
	defer d.abandon()
	if e.Engine == "postgres" {
		d.pg, d.dbName = e.admin, w.dbName
	}
	ctx = context.WithoutCancel(ctx)
	if err := w.setup(ctx, c.Scene); err != nil {
		res.Failures = append(res.Failures, "scene: "+err.Error())
		return res
	}
	t.add("scene %s: order %s, payment %s, attempt %s", c.Scene, w.S.OrderNo, w.S.PaymentNo, w.S.OutTradeNo)
	a := d.start(ctx, w, c.A, "A")
	for a.state == parked && a.steps < c.P {
		d.advance(a)
	}
	if c.B != nil && (a.state != parked || a.steps != c.P) {
		res.Skipped = true
		d.finish(a)
		return res
	}
	switch {
	case c.B == nil: // a probe: A alone
		d.finish(a)
	case c.B == crashOp:
		if a.state == blocked {
			d.finish(a)
		} else {
			d.crash(a)
		}
		t.add("restart: every instance starts again; what was committed stays")
		if err := w.Restart(ctx); err != nil {
			res.Failures = append(res.Failures, "restart: "+err.Error())
			return res
		}
	default:
		b := d.start(ctx, w, c.B, "B")
		if c.Q > 0 {
			for b.state == parked && b.steps < c.Q {
				d.advance(b)
			}
			if b.state != parked || b.steps != c.Q {
				res.Skipped = true
				d.finish(b, a)
				d.finish(a, b)
				return res
			}
			d.finish(a, b)
			d.finish(b, a)
		} else {
			d.finish(b, a)
			d.finish(a, b)
		}
		res.StepsB = b.steps
		for _, r := range []*opRun{a, b} {
			if r.panic != nil {
				res.Failures = append(res.Failures, fmt.Sprintf("%s panicked: %v", r.label, r.panic))
			}
		}
	}
	res.StepsA = a.steps
	if a.panic != nil && c.B == nil {
		res.Failures = append(res.Failures, fmt.Sprintf("A panicked: %v", a.panic))
	}
	if d.stuck {
		res.Failures = append(res.Failures, "stuck: every operation waits for another")
		return res
	}
	t.add("settle: timers due, sweepers run, notifications delivered, bus drained")
	w.settle(ctx, t)
	res.Failures = append(res.Failures, w.check(ctx, t)...)
	if len(res.Failures) == 0 {
		t.add("PASS")
	} else {
		t.add("FAIL")
	}
	return res
}

// Steps is how many steps A takes alone in the scene and profile.
func (e *Explorer) Steps(ctx context.Context, scene string, p Profile, a *Op) (int, error) {
	key := scene + "/" + p.Name + "/" + a.Name
	e.mu.Lock()
	n, ok := e.probes[key]
	e.mu.Unlock()
	if ok {
		return n, nil
	}
	res := e.Run(ctx, Case{Scene: scene, Profile: p, A: a, P: 0})
	if len(res.Failures) > 0 {
		return 0, fmt.Errorf("%s alone in %s/%s: %s\n%s", a.Name, scene, p.Name, strings.Join(res.Failures, "; "), res.Trace)
	}
	e.mu.Lock()
	if e.probes == nil {
		e.probes = map[string]int{}
	}
	e.probes[key] = res.StepsA
	e.mu.Unlock()
	return res.StepsA, nil
}

// Cases lists the cases of the profiles over the operations named (all if none), at
// depth 1 or 2. A probe runs each operation alone first, to count its steps.
func (e *Explorer) Cases(ctx context.Context, profiles []Profile, ops []string, depth int) ([]Case, error) {
	return e.CasesIn(ctx, profiles, Scenes, ops, depth)
}

// CasesIn is Cases in the scenes named only.
func (e *Explorer) CasesIn(ctx context.Context, profiles []Profile, scenes, ops []string, depth int) ([]Case, error) {
	var chosen []*Op
	for _, op := range Catalogue {
		if op.Second && e.Engine != "postgres" {
			continue
		}
		if len(ops) == 0 || contains(ops, op.Name) {
			chosen = append(chosen, op)
		}
	}
	bs := append(append([]*Op(nil), chosen...), crashOp)
	var cases []Case
	for _, p := range profiles {
		for _, scene := range scenes {
			for _, a := range chosen {
				if !a.applies(scene) {
					continue
				}
				na, err := e.Steps(ctx, scene, p, a)
				if err != nil {
					return nil, err
				}
				for _, b := range bs {
					if !b.applies(scene) {
						continue
					}
					nb := 0
					if depth >= 2 && b != crashOp {
						if nb, err = e.Steps(ctx, scene, p, b); err != nil {
							return nil, err
						}
					}
					for pa := 1; pa <= na; pa++ {
						cases = append(cases, Case{Scene: scene, Profile: p, A: a, B: b, P: pa})
						for q := 1; q <= nb; q++ {
							cases = append(cases, Case{Scene: scene, Profile: p, A: a, B: b, P: pa, Q: q})
						}
					}
				}
			}
		}
	}
	return cases, nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// RunAll runs cases on workers goroutines and reports each failure to out as it is found,
// with its replay command. It returns the results in the cases' order.
func (e *Explorer) RunAll(ctx context.Context, cases []Case, workers int, out io.Writer, replay func(Case) string) []*Result {
	results := make([]*Result, len(cases))
	next := make(chan int)
	var wg sync.WaitGroup
	var outMu sync.Mutex
	finished := 0
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				r := e.Run(ctx, cases[i])
				results[i] = r
				outMu.Lock()
				if r.Failed() {
					fmt.Fprintf(out, "FAIL %s: %s\n  replay: %s\n", cases[i].Name(), strings.Join(r.Failures, "; "), replay(cases[i]))
				}
				if finished++; e.Progress != nil {
					e.Progress(finished, len(cases))
				}
				outMu.Unlock()
			}
		}()
	}
	for i := range cases {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return results
}

// ---- worlds on their databases ----

// world makes c's database from its profile's template and the system on it.
func (e *Explorer) world(ctx context.Context, c Case) (*World, func(), error) {
	tpl, err := e.template(ctx, c.Profile)
	if err != nil {
		return nil, nil, err
	}
	e.mu.Lock()
	e.seq++
	n := e.seq
	e.mu.Unlock()
	var dsn, dbName string
	var drop func()
	var put func(*World) // ends the case's world, and puts its database back for the next
	var slot *sqliteSlot
	var lent []*sqlstore.Store // stores left open by the case before, on the database
	switch e.Engine {
	case "sqlite":
		// A case database is used by case after case, with its store's connections open,
		// put back as the template left it after each (sqliteSlot.reset).
		e.mu.Lock()
		if k := len(tpl.spare); k > 0 {
			slot, tpl.spare = tpl.spare[k-1], tpl.spare[:k-1]
		}
		e.mu.Unlock()
		if slot == nil {
			slot = &sqliteSlot{path: filepath.Join(e.Dir, fmt.Sprintf("case-%d.db", n))}
			if err := copyFile(tpl.dsn, slot.path); err != nil {
				return nil, nil, err
			}
		}
		dsn = slot.path
		drop = func() { e.dropSlot(slot) }
		put = func(w *World) { e.putBackSQLite(w, slot, tpl) }
		if slot.store != nil {
			lent, slot.store = []*sqlstore.Store{slot.store}, nil
		}
	case "postgres":
		// A database of the template's is made once and used by case after case, put back
		// as the template left it after each: making one copies the template's files
		// (some 10 MB, most of it the catalogue) and took more of the server's CPU than
		// the case itself.
		var pslot *pgSlot
		e.mu.Lock()
		if k := len(tpl.free); k > 0 {
			pslot, tpl.free = tpl.free[k-1], tpl.free[:k-1]
		}
		e.mu.Unlock()
		if pslot == nil {
			pslot = &pgSlot{name: fmt.Sprintf("explore_case_%d_%d", os.Getpid(), n)}
			if _, err := e.admin.ExecContext(ctx, `CREATE DATABASE `+pslot.name+` TEMPLATE `+tpl.dsn); err != nil {
				return nil, nil, err
			}
			e.mu.Lock()
			e.caseDBs = append(e.caseDBs, pslot.name)
			e.mu.Unlock()
		}
		dbName = pslot.name
		dsn = withDatabase(e.PG, dbName)
		lent, pslot.stores = pslot.stores, nil
		drop = func() { e.dropPG(pslot) }
		put = func(w *World) { e.putBack(w, pslot, tpl) }
	default:
		return nil, nil, fmt.Errorf("no engine %q", e.Engine)
	}
	w, err := newWorld(ctx, e.Engine, dsn, c.Profile, lent)
	if err != nil {
		drop()
		return nil, nil, err
	}
	w.fixture, w.dbName = tpl.fix, dbName
	if e.Engine == "postgres" {
		w.endSessions = func() error {
			_, err := e.admin.ExecContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, dbName)
			return err
		}
	}
	return w, func() { put(w) }, nil
}

// template makes, once per profile, the database every case of it starts from: migrated,
// with the profile's SKU (one unit) and an app.
func (e *Explorer) template(ctx context.Context, p Profile) (*templateDB, error) {
	e.mu.Lock()
	if e.fixtures == nil {
		e.fixtures = map[string]*templateDB{}
	}
	tpl := e.fixtures[p.Name]
	if tpl == nil {
		tpl = &templateDB{}
		e.fixtures[p.Name] = tpl
	}
	e.mu.Unlock()
	tpl.once.Do(func() { tpl.err = e.makeTemplate(ctx, p, tpl) })
	return tpl, tpl.err
}

func (e *Explorer) makeTemplate(ctx context.Context, p Profile, tpl *templateDB) (err error) {
	var dsn string
	switch e.Engine {
	case "sqlite":
		tpl.dsn = filepath.Join(e.Dir, "template-"+p.Name+".db")
		dsn = tpl.dsn
	case "postgres":
		if err := e.openAdmin(); err != nil {
			return err
		}
		tpl.dsn = fmt.Sprintf("explore_tpl_%d_%s", os.Getpid(), p.Name)
		if _, err := e.admin.ExecContext(ctx, `DROP DATABASE IF EXISTS `+tpl.dsn); err != nil {
			return err
		}
		if _, err := e.admin.ExecContext(ctx, `CREATE DATABASE `+tpl.dsn); err != nil {
			return err
		}
		dsn = withDatabase(e.PG, tpl.dsn)
	}
	w, err := newWorld(ctx, e.Engine, dsn, p, nil)
	if err != nil {
		return err
	}
	defer func() {
		w.Close()
		if err == nil && e.Engine == "postgres" {
			tpl.snap, err = snapshot(ctx, dsn)
		}
		if err == nil && e.Engine == "sqlite" {
			tpl.sq, err = sqliteSnap(ctx, dsn)
		}
	}()
	in := w.In(0)
	tpl.fix.SKU = "SKU-" + p.Name
	if _, _, err := in.Orders.CreateSKU(ctx, order.NewSKU{SKU: tpl.fix.SKU, MerchantID: "shop", Title: "explorer " + p.Name, Price: p.Price,
		Stock: max(p.Stock, 1), StockBuckets: max(p.Buckets, 1), ProductType: p.ProductType, StockPolicy: p.Policy, ReserveMinutes: p.ReserveMinutes}); err != nil {
		return err
	}
	app, _, err := in.Apps.CreateApp(ctx, apppay.CreateAppRequest{Name: "explorer", WebhookURLs: []string{"https://app.example/hooks"}, Channels: []string{orderpay.ChannelAlipay, orderpay.ChannelWechat}}, operator)
	if err != nil {
		return err
	}
	tpl.fix.AppID = app.ID
	return nil
}

// putBackSQLite ends w, a case's world on slot's database, and makes the database ready
// for the next case: reset to the template, its store kept open. A store still busy
// (an operation's transaction not given back) or a reset that fails, and the database is
// dropped.
func (e *Explorer) putBackSQLite(w *World, slot *sqliteSlot, tpl *templateDB) {
	st := w.inst[0].keep()
	w.Close()
	if st == nil || tpl.sq == nil || !idle(st) || slot.reset(context.Background(), tpl.sq) != nil {
		if st != nil {
			st.Close()
		}
		e.dropSlot(slot)
		return
	}
	slot.store = st
	e.mu.Lock()
	tpl.spare = append(tpl.spare, slot)
	e.mu.Unlock()
}

// dropSlot closes slot's store, if it has one, and removes its database.
func (e *Explorer) dropSlot(slot *sqliteSlot) {
	slot.closeConn()
	if slot.store != nil {
		slot.store.Close()
		slot.store = nil
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(slot.path + suffix)
	}
}

// Close drops what the explorer made.
func (e *Explorer) Close() {
	for _, tpl := range e.fixtures {
		for _, slot := range tpl.spare {
			e.dropSlot(slot)
		}
		tpl.spare = nil
	}
	for _, tpl := range e.fixtures {
		for _, slot := range tpl.free {
			closeAll(slot.stores)
		}
		tpl.free = nil
	}
	if e.admin != nil {
		for _, name := range e.caseDBs {
			e.admin.Exec(`DROP DATABASE IF EXISTS ` + name + ` WITH (FORCE)`)
		}
		for _, tpl := range e.fixtures {
			e.admin.Exec(`DROP DATABASE IF EXISTS ` + tpl.dsn + ` WITH (FORCE)`)
		}
		e.admin.Close()
	}
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}

// withDatabase is the DSN dsn with its database replaced by name.
func withDatabase(dsn, name string) string {
	base, query, _ := strings.Cut(dsn, "?")
	if i := strings.LastIndex(base, "/"); i > len("postgres://") {
		base = base[:i]
	}
	if query != "" {
		return base + "/" + name + "?" + query
	}
	return base + "/" + name
}

// Summary counts results.
func Summary(results []*Result) (ran, failed, skipped int) {
	for _, r := range results {
		switch {
		case r == nil:
		case r.Skipped:
			skipped++
		case r.Failed():
			ran++
			failed++
		default:
			ran++
		}
	}
	return
}

// SortedFailures are the failed results by name.
func SortedFailures(results []*Result) []*Result {
	var out []*Result
	for _, r := range results {
		if r != nil && r.Failed() {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Case.Name() < out[j].Case.Name() })
	return out
}
