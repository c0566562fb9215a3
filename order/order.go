// Package order is the order system: the catalogue's stock, orders from creation to
// payment, and the order side of payment results. It never talks to a channel; it asks the
// payment center through orderpay.PaymentCenter and hears back through
// orderpay.PaymentResults and the payment.succeeded event.
package order

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"orderpay"
)

// Defaults.
const (
	MaxItemsDefault = 50     // lines per order
	MaxQtyDefault   = 10_000 // units per line
	// AutoApproveRefundMaxDefault: refunds before shipping up to 200 yuan are approved by the rule.
	AutoApproveRefundMaxDefault = 200_00
	ReturnWindowDefault         = 7 * 24 * time.Hour
)

// ChinaTime is UTC+8, in which order numbers are dated (orderpay.ChinaTime, the zone of
// the channels' bills too).
var ChinaTime = orderpay.ChinaTime

// Config configures the Service. Zero fields take the documented defaults.
type Config struct {
	Store orderpay.Store // required
	// Payments is the payment center. Required for Pay.
	Payments orderpay.PaymentCenter
	// Clock defaults to the system clock.
	Clock orderpay.Clock
	// PayWindows is the unpaid timeout per product type. Defaults to
	// orderpay.DefaultPayWindows (3 days, 30 minutes, 15 minutes).
	PayWindows orderpay.PayWindows
	// NewOrderNo makes an order number (see orderno.go for both schemes). It
	// runs before the order's transaction, never inside it. Defaults to the first scheme,
	// TimestampOrderNoFunc: the time yyyyMMddHHmmss (UTC+8) followed by 6 random digits,
	// retried on collision.
	NewOrderNo func(ctx context.Context, now time.Time) (string, error)
	// BuyerCaps bound what one buyer may hold unpaid, per product type: the units of a SKU
	// in one order, the units of a SKU in the buyer's unpaid orders, and the buyer's unpaid
	// orders (orderpay.BuyerCaps, checked by checkBuyerCaps). nil takes
	// orderpay.DefaultBuyerCaps; a type absent from the map has no cap. A SKU's own
	// MaxPerOrder and MaxUnpaidPerBuyer come first.
	BuyerCaps orderpay.BuyerCaps
	// MaxItems defaults to MaxItemsDefault; MaxQty to MaxQtyDefault.
	MaxItems int
	MaxQty   int64
	// ReserveMinute is how long one of a "reserve" SKU's reserve_minutes lasts. Defaults to
	// a minute; the chaos harness compresses it with the rest of business time.
	ReserveMinute time.Duration
	// OutboxWritten is called after a commit that wrote outbox messages (to wake the relay).
	OutboxWritten func()
	// RefundCreated is called after a commit that may have recorded a channel refund (to
	// wake the payment center's refund worker). Defaults to a no-op: the worker's own
	// interval picks it up.
	RefundCreated func()
	// PackageLimits bound one parcel when a paid order is split. Defaults to
	// orderpay.DefaultPackageLimits (20 kg, 120 000 cm³).
	PackageLimits orderpay.PackageLimits
	// AutoApproveRefundMax is the rule for refunds before shipping: one of at most this
	// many fen is approved at once, a larger one waits for the merchant's review. Defaults
	// to AutoApproveRefundMaxDefault; negative sends every refund to review.
	AutoApproveRefundMax int64
	// ReturnWindow is how long after receipt shipped units may be returned. Defaults to
	// ReturnWindowDefault (seven days, 7天无理由).
	ReturnWindow time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	c.Clock = cmp.Or[orderpay.Clock](c.Clock, orderpay.SystemClock{})
	if c.PayWindows == nil {
		c.PayWindows = orderpay.DefaultPayWindows
	}
	if c.NewOrderNo == nil {
		c.NewOrderNo = TimestampOrderNoFunc
	}
	if c.BuyerCaps == nil {
		c.BuyerCaps = orderpay.DefaultBuyerCaps
	}
	c.MaxItems = cmp.Or(c.MaxItems, MaxItemsDefault)
	c.MaxQty = cmp.Or(c.MaxQty, MaxQtyDefault)
	c.ReserveMinute = cmp.Or(c.ReserveMinute, time.Minute)
	if c.OutboxWritten == nil {
		c.OutboxWritten = func() {}
	}
	if c.RefundCreated == nil {
		c.RefundCreated = func() {}
	}
	if c.PackageLimits == (orderpay.PackageLimits{}) {
		c.PackageLimits = orderpay.DefaultPackageLimits
	}
	c.AutoApproveRefundMax = cmp.Or(c.AutoApproveRefundMax, AutoApproveRefundMaxDefault)
	c.ReturnWindow = cmp.Or(c.ReturnWindow, ReturnWindowDefault)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// Service runs the order system's use cases.
type Service struct {
	cfg Config
	log *slog.Logger
	q   queues
}

var _ orderpay.PaymentResults = (*Service)(nil)

// New returns a Service.
func New(cfg Config) (*Service, error) {
	cfg = cfg.withDefaults()
	if cfg.Store == nil {
		return nil, errors.New("order: Config.Store is required")
	}
	for t := range orderpay.DefaultPayWindows {
		if cfg.PayWindows[t] <= 0 {
			return nil, fmt.Errorf("order: PayWindows[%s] must be positive", t)
		}
	}
	return &Service{cfg: cfg, log: cfg.Logger}, nil
}

// TimestampOrderNo returns yyyyMMddHHmmss in UTC+8 followed by 6 random digits.
func TimestampOrderNo(now time.Time) string {
	n, err := rand.Int(rand.Reader, big.NewInt(1_000_000))
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return now.In(ChinaTime).Format("20060102150405") + fmt.Sprintf("%06d", n.Int64())
}

// ---- catalogue ----

// NewSKU is a SKU to add to the catalogue with its initial stock.
type NewSKU struct {
	SKU         string
	MerchantID  string
	Title       string
	Price       int64
	Stock       int64
	BackupUnits int64 // kept aside for payments after Stock ran out (docs/design.md §6.2); 0 to BackupUnitsMax, not for policy "order"
	ProductType orderpay.ProductType
	StockPolicy orderpay.StockPolicy
	// LimitPerBuyer caps the units one buyer may hold in orders not cancelled; 0 is none.
	LimitPerBuyer int64
	// MaxPerOrder and MaxUnpaidPerBuyer are the SKU's own buyer caps: the units of it in
	// one order, and the units of it one buyer holds in unpaid orders (0 to
	// orderpay.MaxBuyerCap; 0 takes the shop's cap for the SKU's product type).
	MaxPerOrder       int64
	MaxUnpaidPerBuyer int64
	// StockBuckets splits the stock over this many rows (1 to 256; 0 is 1): for a
	// flash-sale SKU, so that its buyers do not all wait on one row.
	StockBuckets int
	// Warehouse ships it ("" is orderpay.DefaultWarehouse); WeightG and VolumeCm3 are one
	// unit's (0 is negligible), for splitting paid orders into parcels.
	Warehouse string
	WeightG   int64
	VolumeCm3 int64
	// ReserveMinutes is how long a "reserve" SKU holds an unpaid order's units (1 to
	// ReserveMinutesMax; 0 is ReserveMinutesDefault). Other policies must leave it 0.
	ReserveMinutes int64
	// Queued sells the SKU through its queue (tickets.go); QueueWait (0:
	// orderpay.QueueWaitDefault) and QueuePace (0: as fast as the store commits) apply only
	// then.
	Queued    bool
	QueueWait time.Duration
	QueuePace int64
}

func (n *NewSKU) validate() error {
	switch {
	case !orderpay.ValidID(n.SKU):
		return orderpay.Errorf(orderpay.EINVALID, "sku must be 1-64 letters, digits, '-', '_' or '.'")
	case !orderpay.ValidID(n.MerchantID):
		return orderpay.Errorf(orderpay.EINVALID, "merchant_id must be 1-64 letters, digits, '-', '_' or '.'")
	case strings.TrimSpace(n.Title) == "" || utf8.RuneCountInString(n.Title) > 128:
		return orderpay.Errorf(orderpay.EINVALID, "title must be 1-128 characters")
	case n.Price <= 0 || n.Price > orderpay.MaxChannelAmount:
		return orderpay.Errorf(orderpay.EINVALID, "price must be between 1 and %d fen", orderpay.MaxChannelAmount)
	case n.Stock < 0 || n.Stock > 1_000_000_000:
		return orderpay.Errorf(orderpay.EINVALID, "stock must be between 0 and 1000000000")
	case n.BackupUnits < 0 || n.BackupUnits > BackupUnitsMax:
		return orderpay.Errorf(orderpay.EINVALID, "backup_units must be between 0 and %d", BackupUnitsMax)
	case n.BackupUnits > 0 && n.StockPolicy == orderpay.StockAtOrder:
		return orderpay.Errorf(orderpay.EINVALID, "backup_units applies only to stock_policy payment or reserve: an order-policy SKU's payment never finds its units gone")
	case n.StockBuckets < 0 || n.StockBuckets > 256:
		return orderpay.Errorf(orderpay.EINVALID, "stock_buckets must be between 1 and 256")
	case n.LimitPerBuyer < 0 || n.LimitPerBuyer > 1_000_000_000:
		return orderpay.Errorf(orderpay.EINVALID, "limit_per_buyer must be between 0 (none) and 1000000000")
	case n.MaxPerOrder < 0 || n.MaxPerOrder > orderpay.MaxBuyerCap || n.MaxUnpaidPerBuyer < 0 || n.MaxUnpaidPerBuyer > orderpay.MaxBuyerCap:
		return orderpay.Errorf(orderpay.EINVALID, "max_per_order and max_unpaid_per_buyer must be between 0 (the shop's cap) and %d", orderpay.MaxBuyerCap)
	case !n.ProductType.Valid():
		return orderpay.Errorf(orderpay.EINVALID, "product_type must be normal, special or fast")
	case n.Warehouse != "" && !orderpay.ValidID(n.Warehouse):
		return orderpay.Errorf(orderpay.EINVALID, "warehouse must be 1-64 letters, digits, '-', '_' or '.'")
	case n.WeightG < 0 || n.WeightG > 1_000_000 || n.VolumeCm3 < 0 || n.VolumeCm3 > 10_000_000:
		return orderpay.Errorf(orderpay.EINVALID, "weight_g must be 0-1000000 and volume_cm3 0-10000000")
	}
	if !n.StockPolicy.Valid() {
		return orderpay.Errorf(orderpay.EINVALID, "stock_policy must be order, payment or reserve")
	}
	if err := n.validateQueue(); err != nil {
		return err
	}
	return n.validateReserve()
}

// CreateSKU adds a SKU and its stock. A taken SKU code is ECONFLICT.
func (s *Service) CreateSKU(ctx context.Context, n NewSKU) (*orderpay.SKU, *orderpay.Stock, error) {
	if n.ProductType == "" {
		n.ProductType = orderpay.ProductNormal
	}
	if n.StockPolicy == "" {
		n.StockPolicy = orderpay.StockAtOrder
	}
	if err := n.validate(); err != nil {
		return nil, nil, err
	}
	sku := &orderpay.SKU{SKU: n.SKU, MerchantID: n.MerchantID, Title: n.Title, Price: n.Price,
		ProductType: n.ProductType, StockPolicy: n.StockPolicy, LimitPerBuyer: n.LimitPerBuyer, MaxPerOrder: n.MaxPerOrder, MaxUnpaidPerBuyer: n.MaxUnpaidPerBuyer, StockBuckets: max(n.StockBuckets, 1), ReserveMinutes: n.ReserveMinutes,
		Warehouse: cmp.Or(n.Warehouse, orderpay.DefaultWarehouse), WeightG: n.WeightG, VolumeCm3: n.VolumeCm3, CreatedAt: orderpay.Now(s.cfg.Clock),
		Queued: n.Queued, QueueWait: n.QueueWait, QueuePace: n.QueuePace}
	if err := s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) error { return createSKU(ctx, tx, sku, n) }); err != nil {
		return nil, nil, err
	}
	return sku, &orderpay.Stock{SKU: n.SKU, Available: n.Stock, Total: n.Stock, BackupUnits: n.BackupUnits, BackupLeft: n.BackupUnits}, nil
}

// createSKU writes the SKU, its stock and its backup (if it keeps one) in tx.
func createSKU(ctx context.Context, tx orderpay.Tx, sku *orderpay.SKU, n NewSKU) error {
	if err := tx.CreateSKU(ctx, sku, n.Stock); err != nil {
		return err
	}
	if n.BackupUnits > 0 {
		return tx.CreateStockBackup(ctx, sku.SKU, n.BackupUnits)
	}
	return nil
}

// CatalogueEntry is a SKU with its stock.
type CatalogueEntry struct {
	orderpay.SKU
	Stock orderpay.Stock
}

// Catalogue lists every SKU with its stock.
func (s *Service) Catalogue(ctx context.Context) ([]CatalogueEntry, error) {
	skus, err := s.cfg.Store.SKUs(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]CatalogueEntry, 0, len(skus))
	for _, sku := range skus {
		st, err := s.cfg.Store.Stock(ctx, sku.SKU)
		if err != nil {
			return nil, err
		}
		out = append(out, CatalogueEntry{SKU: sku, Stock: *st})
	}
	return out, nil
}

// ---- orders ----

// CreateOrderRequest is a buyer's order.
type CreateOrderRequest struct {
	BuyerID string
	Items   []ItemRequest
	// IdempotencyKey is the client's Idempotency-Key header, if it sent one (see
	// orderpay.RequestKey).
	IdempotencyKey string
	// DeviceID is the buyer's device (the X-Device-Id header), checked against the
	// blocklist; optional.
	DeviceID string
	// CouponID is one of the buyer's coupons to use; optional (see coupons.go).
	CouponID string
	// Address is where the goods go; optional here, but a parcel ships only to an address,
	// which the buyer may set or change until the first parcel ships.
	Address orderpay.Address
}

// ItemRequest is one line of a CreateOrderRequest.
type ItemRequest struct {
	SKU string
	Qty int64
}

var errOrderNoTaken = errors.New("order number taken")

// validate checks what a request must be before anything is read for it.
func (s *Service) validate(req CreateOrderRequest) error {
	if !orderpay.ValidID(req.BuyerID) {
		return orderpay.Errorf(orderpay.EINVALID, "buyer_id must be 1-64 letters, digits, '-', '_' or '.'")
	}
	if !req.Address.Empty() {
		if err := req.Address.Validate(); err != nil {
			return err
		}
	}
	if len(req.Items) == 0 || len(req.Items) > s.cfg.MaxItems {
		return orderpay.Errorf(orderpay.EINVALID, "an order needs between 1 and %d items", s.cfg.MaxItems)
	}
	for i, it := range req.Items {
		if it.SKU == "" {
			return orderpay.Errorf(orderpay.EINVALID, "items[%d].sku is required", i)
		}
		if it.Qty <= 0 || it.Qty > s.cfg.MaxQty {
			return orderpay.Errorf(orderpay.EINVALID, "items[%d].qty must be between 1 and %d", i, s.cfg.MaxQty)
		}
	}
	return nil
}

// CreateOrder validates the request, deducts stock by each SKU's policy, prices the order,
// sets its pay deadline, and writes it with its order.created event, all in one
// transaction: either all of it happens or none of it does.
func (s *Service) CreateOrder(ctx context.Context, req CreateOrderRequest) (*orderpay.Order, error) {
	o, _, err := s.Create(ctx, req)
	return o, err
}

// Create is CreateOrder that also reports whether the order is one an earlier request
// created: the same Idempotency-Key, or the same request again within 10 seconds.
func (s *Service) Create(ctx context.Context, req CreateOrderRequest) (*orderpay.Order, bool, error) {
	if err := s.validate(req); err != nil {
		return nil, false, err
	}
	// One read for what the request is checked against before its transaction: the
	// blocklist, then the request key (a request seen before gets its order back).
	key, keyErr := requestKey(req)
	lookup := ""
	if keyErr == nil {
		lookup = key.Key
	}
	blocked, stored, err := s.cfg.Store.CreateChecks(ctx, req.BuyerID, req.DeviceID, lookup)
	if err != nil {
		return nil, false, err
	}
	if err := refuseBlocked(blocked); err != nil {
		return nil, false, err
	}
	if keyErr != nil {
		return nil, false, keyErr
	}
	if o, err := s.replayStored(ctx, key, stored); o != nil || err != nil {
		return o, o != nil, err
	}
	for attempt := 0; ; attempt++ {
		o, err := s.createOrder(ctx, req, key, nil)
		if capped(err) {
			// An identical request may have committed while this one waited for the
			// buyer's lock: its order is this one's, not a refusal.
			if o, rerr := s.replay(ctx, key); o != nil || rerr != nil {
				return o, o != nil, rerr
			}
			return nil, false, err
		}
		if errors.Is(err, errRequestKeyTaken) {
			// An identical request committed first: its order is this one's.
			o, err := s.replay(ctx, key)
			if o == nil && err == nil {
				err = orderpay.Errorf(orderpay.EUNAVAILABLE, "an identical request is being processed; retry")
			}
			return o, o != nil, err
		}
		if errors.Is(err, errOrderNoTaken) && attempt < 5 {
			continue // a 1-in-a-million collision within the same second: draw again
		}
		if errors.Is(err, errOrderNoTaken) {
			return nil, false, orderpay.Errorf(orderpay.EINTERNAL, "could not find a free order number")
		}
		if err != nil {
			return nil, false, err
		}
		s.cfg.OutboxWritten()
		s.log.Info("order created", "order_no", o.No, "buyer_id", o.BuyerID, "payable", o.Payable, "pay_deadline", o.PayDeadline)
		return o, false, nil
	}
}

// createOrder makes the order in one transaction. key, if not nil, is claimed for it; also,
// if not nil, runs in the transaction once the order is written (a ticket ends there).
func (s *Service) createOrder(ctx context.Context, req CreateOrderRequest, key *orderpay.RequestKey, also func(tx orderpay.Tx, o *orderpay.Order) error) (*orderpay.Order, error) {
	// The number is drawn before the transaction: the sequence scheme reserves it in the
	// store, which must not happen inside InTx (nor be repeated when InTx retries).
	now := orderpay.Now(s.cfg.Clock)
	no, err := s.cfg.NewOrderNo(ctx, now)
	if err != nil {
		return nil, err
	}
	var o *orderpay.Order
	err = s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) error {
		var err error
		o, err = s.createOrderIn(ctx, tx, req, key, no, now, also)
		return err
	})
	return o, err
}

// createOrderIn is createOrder's transaction: the order numbered no, made at now, in tx.
func (s *Service) createOrderIn(ctx context.Context, tx orderpay.Tx, req CreateOrderRequest, key *orderpay.RequestKey, no string, now time.Time,
	also func(tx orderpay.Tx, o *orderpay.Order) error) (*orderpay.Order, error) {
	o := &orderpay.Order{No: no, BuyerID: req.BuyerID, Status: orderpay.OrderPendingPayment,
		CreatedAt: now, UpdatedAt: now, Address: req.Address}
	var window time.Duration
	skus := make(map[string]*orderpay.SKU, len(req.Items))
	for i, it := range req.Items {
		sku, err := tx.SKU(ctx, it.SKU)
		if orderpay.ErrorCode(err) == orderpay.ENOTFOUND {
			return nil, orderpay.Errorf(orderpay.EINVALID, "items[%d]: sku %q does not exist", i, it.SKU)
		}
		if err != nil {
			return nil, err
		}
		if sku.Queued && also == nil {
			// Only its turn in the queue makes a queued SKU's order (Place).
			return nil, orderpay.Errorf(orderpay.EINVALID, "items[%d]: sku %q is sold through its queue", i, it.SKU)
		}
		skus[sku.SKU] = sku
		amount := sku.Price * it.Qty // both bounded by validation: no overflow
		o.Items = append(o.Items, orderpay.OrderItem{Line: i + 1, SKU: sku.SKU, MerchantID: sku.MerchantID, Title: sku.Title,
			UnitPrice: sku.Price, Qty: it.Qty, Amount: amount, Payable: amount})
		o.Total += amount
		// The order may stay unpaid only as long as its most perishable item allows.
		if w := s.cfg.PayWindows[sku.ProductType]; window == 0 || w < window {
			window, o.ProductType = w, sku.ProductType
		}
	}
	if o.Total > orderpay.MaxChannelAmount {
		return nil, orderpay.Errorf(orderpay.EINVALID, "the order total %s yuan is above the channels' limit", orderpay.FormatYuan(o.Total))
	}
	// The buyer caps, before anything is written.
	if err := s.checkBuyerCaps(ctx, tx, o, skus); err != nil {
		return nil, err
	}
	if err := applyCoupon(ctx, tx, o, req.CouponID, now); err != nil {
		return nil, err
	}
	checked := map[string]int64{}
	for _, it := range inLockOrder(o.Items) {
		if err := s.deductAtCreate(ctx, tx, skus[it.SKU], it.Qty, checked); err != nil {
			return nil, err
		}
		if err := countPurchase(ctx, tx, o.BuyerID, skus[it.SKU], it.Qty); err != nil {
			return nil, err
		}
	}
	o.Payable = o.Total - o.Discount
	o.PayDeadline = now.Add(window)
	if err := tx.CreateOrder(ctx, o); err != nil {
		if orderpay.ErrorCode(err) == orderpay.ECONFLICT {
			return nil, errOrderNoTaken
		}
		return nil, err
	}
	if err := s.createHolds(ctx, tx, o, skus, now); err != nil {
		return nil, err
	}
	if key != nil {
		if err := s.claimRequestKey(ctx, tx, key, o.No, now); err != nil {
			return nil, err
		}
	}
	if also != nil {
		if err := also(tx, o); err != nil {
			return nil, err
		}
	}
	return o, tx.Enqueue(ctx, orderMessage(orderpay.SubjectOrderCreated, o, now))
}

// inLockOrder returns the items sorted by SKU: every transaction that moves the stock of
// several SKUs takes their rows in this one order, so that two of them never wait on each
// other (a deadlock, which PostgreSQL would break by failing one).
func inLockOrder(items []orderpay.OrderItem) []orderpay.OrderItem {
	sorted := slices.Clone(items)
	slices.SortStableFunc(sorted, func(a, b orderpay.OrderItem) int { return strings.Compare(a.SKU, b.SKU) })
	return sorted
}

func orderMessage(subject string, o *orderpay.Order, at time.Time) orderpay.Message {
	payload, _ := json.Marshal(orderpay.OrderEventPayload{OrderNo: o.No, BuyerID: o.BuyerID, Status: o.Status,
		Payable: o.Payable, PaymentNo: o.PaymentNo, At: at})
	return orderpay.Message{ID: subject + ":" + o.No, Subject: subject, Payload: payload, CreatedAt: at}
}

// Order returns an order with its items.
func (s *Service) Order(ctx context.Context, no string) (*orderpay.Order, error) {
	return s.cfg.Store.Order(ctx, no)
}

// PollWaitDefault bounds how long a buyer's read of an unpaid order waits for the queries
// it triggers.
const PollWaitDefault = time.Second

// Page reads the order no as its buyer's page shows it: Store.OrderPage.
func (s *Service) Page(ctx context.Context, no string) (*orderpay.OrderPage, error) {
	return s.cfg.Store.OrderPage(ctx, no)
}

// Watch is a buyer reading their order. While it is unpaid, the read asks the payment
// center to query the channel (rate-limited there) and waits briefly for the answer, so
// that a buyer watching the order sees PAID within seconds even if the channel's
// notification is lost (docs/design.md §5).
func (s *Service) Watch(ctx context.Context, no string) (*orderpay.Order, error) {
	page, err := s.cfg.Store.OrderPage(ctx, no)
	if err != nil {
		return nil, err
	}
	page, err = s.WatchPage(ctx, page)
	if err != nil {
		return nil, err
	}
	return page.Order, nil
}

// WatchPage is Watch of the order's page as just read. The payment center polls the
// payment the page read with the order, and the page's attempts become those it last
// read. The page is read again only if the payment center had a success for it, or the
// poll failed: without a success, the order is still as the page shows it (an order is
// paid only after its payment).
func (s *Service) WatchPage(ctx context.Context, page *orderpay.OrderPage) (*orderpay.OrderPage, error) {
	if page.Order.Status != orderpay.OrderPendingPayment || s.cfg.Payments == nil {
		return page, nil
	}
	pollCtx, cancel := context.WithTimeout(ctx, PollWaitDefault)
	ev, attempts, err := s.cfg.Payments.PollRead(pollCtx, page.Order.No, page.Order.BuyerID, page.Payment, page.Attempts)
	cancel()
	if err == nil && ev == nil {
		page.Attempts = attempts
		return page, nil
	}
	if err == nil {
		err = s.applyResult(ctx, *ev)
	}
	if err != nil {
		s.log.Warn("pulling the payment result failed", "order_no", page.Order.No, "err", err)
	}
	return s.cfg.Store.OrderPage(ctx, page.Order.No)
}

// pullResult applies the order's payment success if the payment center has one: the pull
// side of "同步+异步", for when the push (direct call and event) has not arrived
// yet, e.g. lost in a crash and waiting for the broker's redelivery.
func (s *Service) pullResult(ctx context.Context, no string) error {
	ev, err := s.cfg.Payments.Result(ctx, no)
	if err != nil || ev == nil {
		return err
	}
	return s.applyResult(ctx, *ev)
}

// applyResult applies a payment success the order system pulled.
func (s *Service) applyResult(ctx context.Context, ev orderpay.PaymentSucceeded) error {
	err := s.PaymentSucceeded(ctx, ev)
	if reason, refused := orderpay.Refusal(err); refused {
		// Cancelled meanwhile, or sold out: the payment center refunds it. Any other error
		// (a lost race) is no refusal: the next poll or delivery applies it.
		return s.cfg.Payments.RefundRejected(ctx, ev, reason)
	}
	return err
}

// Pay asks the payment center for a QR code for the unpaid order o, as the caller just read
// it. Repeating the request returns the same code.
func (s *Service) Pay(ctx context.Context, o *orderpay.Order, channel string) (*orderpay.PayResult, error) {
	return s.PayBy(ctx, o, PayWith{Channel: channel})
}

// PayWith is how a buyer pays: the channel and its method, and what the method needs of
// the buyer (orderpay.PrecreateRequest): their wallet identity and their address.
type PayWith struct {
	Channel  string
	Method   orderpay.PayMethod
	Payer    string
	ClientIP string
}

// PayBy asks the payment center for the instruction the buyer's device pays the unpaid
// order o with, by w, as the caller just read o. Repeating the request returns the same
// instruction while it is valid.
func (s *Service) PayBy(ctx context.Context, o *orderpay.Order, w PayWith) (*orderpay.PayResult, error) {
	if s.cfg.Payments == nil {
		return nil, orderpay.Errorf(orderpay.EINTERNAL, "no payment center configured")
	}
	if o.Status != orderpay.OrderPendingPayment {
		return nil, orderpay.Errorf(orderpay.ECONFLICT, "order %s is %s; only a PENDING_PAYMENT order can be paid", o.No, o.Status)
	}
	if !orderpay.Now(s.cfg.Clock).Before(o.PayDeadline) {
		return nil, orderpay.Errorf(orderpay.ECONFLICT, "order %s passed its pay deadline", o.No)
	}
	return s.cfg.Payments.Pay(ctx, orderpay.PayRequest{OrderNo: o.No, Amount: o.Payable, Subject: subject(o),
		Deadline: o.PayDeadline, Channel: w.Channel, Method: w.Method, Payer: w.Payer, ClientIP: w.ClientIP})
}

// PayBarcode takes the unpaid order's payment with the buyer's payment code at a till
// (docs/barcode.md): req's order, amount, subject and deadline are the order's. The order
// becomes PAID like any other when the payment center applies the payment.
func (s *Service) PayBarcode(ctx context.Context, orderNo string, req orderpay.BarcodeRequest) (*orderpay.BarcodeResult, error) {
	bp, ok := s.cfg.Payments.(orderpay.BarcodePayments)
	if !ok {
		return nil, orderpay.Errorf(orderpay.EINTERNAL, "the payment center takes no barcode payments")
	}
	o, err := s.cfg.Store.Order(ctx, orderNo)
	if err != nil {
		return nil, err
	}
	if req.Amount != 0 && req.Amount != o.Payable {
		return nil, orderpay.Errorf(orderpay.EINVALID, "amount: order %s is %d fen, not %d", o.No, o.Payable, req.Amount)
	}
	req.OrderNo, req.Amount, req.Subject, req.Deadline = o.No, o.Payable, subject(o), o.PayDeadline
	req.Till.OrderNo = o.No
	if o.Status != orderpay.OrderPendingPayment || !orderpay.Now(s.cfg.Clock).Before(o.PayDeadline) {
		// A till's retry of the payment that paid it (or that was taken before its
		// deadline) is told that payment: the payment center replays it by its key.
		if ts, ok := s.cfg.Store.(orderpay.TillStore); ok {
			if t, err := ts.TillPaymentByKey(ctx, req.Till.AppID, req.Till.IdempotencyKey); err == nil && t.OrderNo == o.No {
				return bp.PayBarcode(ctx, req)
			}
		}
		if o.Status != orderpay.OrderPendingPayment {
			return nil, orderpay.Errorf(orderpay.ECONFLICT, "order %s is %s; only a PENDING_PAYMENT order can be paid", o.No, o.Status)
		}
		return nil, orderpay.Errorf(orderpay.ECONFLICT, "order %s passed its pay deadline", o.No)
	}
	return bp.PayBarcode(ctx, req)
}

// subject is the trade title shown in the buyer's wallet. Alipay forbids / = & in it.
func subject(o *orderpay.Order) string {
	title := strings.NewReplacer("/", " ", "=", " ", "&", " ").Replace(o.Items[0].Title)
	if n := len(o.Items); n > 1 {
		title = fmt.Sprintf("%s and %d more", title, n-1)
	}
	return title
}

// Applied says, with one read, whether the order was paid by ev's payment already: every
// payment is delivered twice (the direct call, then the event), and the second is told so
// without a write transaction. An order paid by a payment stays so.
func (s *Service) Applied(ctx context.Context, ev orderpay.PaymentSucceeded) bool {
	o, err := s.cfg.Store.Order(ctx, ev.OrderNo)
	return err == nil && paidBy(o, ev.PaymentNo)
}

// paidBy says whether the order was paid by the payment paymentNo.
func paidBy(o *orderpay.Order, paymentNo string) bool {
	return o.PaymentNo == paymentNo && o.Status != orderpay.OrderPendingPayment && o.Status != orderpay.OrderCancelled
}

// PaymentSucceeded marks the order paid and sells its stock by each SKU's policy, once. It
// is called by the payment center directly and again by the payment.succeeded consumer;
// whichever comes second finds the order paid by the same payment and does nothing. A
// payment for an order that can no longer be paid (cancelled, or for another amount) is
// refused (orderpay.RefusePayment): retrying will not help, and the payment center refunds
// it. So is a payment that finds the units it must deduct gone (policy "payment", or
// "reserve" after the hold was released): the order is cancelled first, and the refusal
// says sold_out. A result the payment center's record does not confirm (a forged message)
// changes nothing and is orderpay.Unconfirmed. Every other error, ECONFLICT included, is no
// refusal: the caller delivers the result again.
func (s *Service) PaymentSucceeded(ctx context.Context, ev orderpay.PaymentSucceeded) error {
	applied := false
	err := s.cfg.Store.InTx(ctx, func(tx orderpay.Tx) (err error) {
		// The result comes from the bus, or after the payment center's commit: it is
		// confirmed against the payment center's record first, in this transaction.
		// Nothing moves on a message's word.
		if err := orderpay.ConfirmPaymentSucceeded(ctx, tx, ev); err != nil {
			return err
		}
		applied, err = s.applyPayment(ctx, tx, ev)
		return err
	})
	if errors.Is(err, errSoldOut) {
		return s.cancelSoldOut(ctx, ev)
	}
	if _, refused := orderpay.Refusal(err); orderpay.ErrorCode(err) == orderpay.ECONFLICT && !refused {
		// A concurrent delivery of the same event may have won the conditional update.
		if o, rerr := s.cfg.Store.Order(ctx, ev.OrderNo); rerr == nil && o.PaymentNo == ev.PaymentNo {
			return nil
		}
	}
	if err != nil {
		return err
	}
	if applied {
		s.paid(ev)
	}
	return nil
}

// PaymentSucceededTx is PaymentSucceeded in the payment center's own transaction, when the
// two share a store: the payment and its order commit together, in one transaction instead
// of two. The payment center wrote ev's SUCCESS in tx itself: there is nothing to confirm. It returns what to do once tx has committed. Any error, a refusal or a sold-out
// deduction included, leaves the payment center to roll tx back, commit the payment alone
// and call PaymentSucceeded, which answers it as it always does.
func (s *Service) PaymentSucceededTx(ctx context.Context, tx orderpay.Tx, ev orderpay.PaymentSucceeded) (func(), error) {
	applied, err := s.applyPayment(ctx, tx, ev)
	if err != nil {
		return nil, err
	}
	return func() {
		if applied {
			s.paid(ev)
		}
	}, nil
}

// applyPayment marks the order paid by ev in tx, sells its stock and packs its parcels,
// unless ev's payment paid it already (false).
func (s *Service) applyPayment(ctx context.Context, tx orderpay.Tx, ev orderpay.PaymentSucceeded) (bool, error) {
	o, err := tx.Order(ctx, ev.OrderNo)
	if err != nil {
		return false, err
	}
	if paidBy(o, ev.PaymentNo) {
		return false, nil // already applied
	}
	if o.Status == orderpay.OrderCancelled {
		return false, s.refusal(ctx, tx, o, ev)
	}
	if ev.Amount != o.Payable {
		return false, orderpay.RefusePayment(orderpay.RefundReasonAmountMismatch, "payment %s of %d fen does not match order %s payable %d fen",
			ev.PaymentNo, ev.Amount, o.No, o.Payable)
	}
	to, err := orderpay.OrderMachine.Next(o.Status, orderpay.OrderEventPay)
	if err != nil {
		return false, err
	}
	now := orderpay.Now(s.cfg.Clock)
	if err := tx.TransitionOrder(ctx, orderpay.OrderChange{No: o.No, From: o.Status, To: to, Event: orderpay.OrderEventPay,
		At: now, Actor: "payment-center", Reason: fmt.Sprintf("payment %s via %s (%s)", ev.PaymentNo, ev.Channel, ev.OutTradeNo),
		PaymentNo: ev.PaymentNo}); err != nil {
		return false, err
	}
	// Each SKU is read once, for its stock policy and for packing.
	skus := map[string]*orderpay.SKU{}
	for _, it := range inLockOrder(o.Items) {
		sku := skus[it.SKU]
		if sku == nil {
			if sku, err = tx.SKU(ctx, it.SKU); err != nil {
				return false, err
			}
			skus[it.SKU] = sku
		}
		if err := s.sellAtPayment(ctx, tx, o, it, sku, now); err != nil {
			return false, err
		}
	}
	o.Status, o.PaymentNo = to, ev.PaymentNo
	if err := s.packShipments(ctx, tx, o, skus, now); err != nil {
		return false, err
	}
	return true, tx.Enqueue(ctx, orderMessage(orderpay.SubjectOrderPaid, o, now))
}

// paid is what follows an order's payment once it has committed.
func (s *Service) paid(ev orderpay.PaymentSucceeded) {
	s.cfg.OutboxWritten()
	s.log.Info("order paid", "order_no", ev.OrderNo, "payment_no", ev.PaymentNo, "channel", ev.Channel)
}
