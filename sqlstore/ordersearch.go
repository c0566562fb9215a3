package sqlstore

import (
	"slices"
	"strings"
	"unicode/utf8"

	"orderpay"
)

// ---- the console's order search (migration 0030) ----
//
// Every search is bounded by the page it returns, not by the history:
//   - by status, on orders_by_status (status, created_at): the newest of that status first;
//     the orders awaiting payment, which that index leaves out, on their own partial
//     indexes (orders_pending_by_deadline), sorted: they are the open ones, not the history;
//   - by the start of an order number, as a byte-wise range on the order number, newest
//     number first: numbers begin with their day (yyyyMMdd), so a prefix such as "2026",
//     which matches most of the history, still reads only one page of the index;
//   - by buyer, on orders_by_buyer; and the unfiltered list on orders_by_created.

// orderSearchMigration is the migration that indexes the console's order search.
const orderSearchMigration = 30

// orderSearchExtras are migration 0030's statements for one engine. SQLite's order number
// is compared byte-wise already (BINARY), and its primary key serves the range. A
// PostgreSQL database compares text in its own collation (en_US, ICU…), in which neither
// a range nor LIKE on the primary key finds exactly the numbers that begin with a prefix:
// the search compares in the C collation, on an index of its own.
func orderSearchExtras(d *dialect) []string {
	if d.bytewise == "" {
		return nil
	}
	return []string{`CREATE INDEX orders_by_no_bytes ON orders (order_no` + d.bytewise + `)`}
}

// orderColumns are the columns Orders reads.
const orderColumns = `order_no, buyer_id, status, total, discount, payable, product_type, pay_deadline,
		payment_no, created_at, updated_at, paid_at, closed_at, coupon_id`

// ordersQuery is the statement Orders runs for f, and its arguments; the page's size is its
// last placeholder, not among args. ok is false when no order can match (a prefix that is
// not valid text): there is nothing to run.
func (d *dialect) ordersQuery(f orderpay.OrderFilter) (query string, args []any, ok bool) {
	var where []string
	order := `created_at DESC, order_no DESC`
	if f.NoPrefix != "" {
		lo, hi, ok := prefixRange(f.NoPrefix)
		if !ok {
			return "", nil, false
		}
		no := `order_no` + d.bytewise
		where, args = append(where, no+` >= ?`), append(args, lo)
		if hi != "" {
			where, args = append(where, no+` < ?`), append(args, hi)
		}
		order = no + ` DESC`
	}
	if f.BuyerID != "" {
		where, args = append(where, `buyer_id = ?`), append(args, f.BuyerID)
	}
	switch {
	case f.Status == "":
	case !slices.Contains(orderpay.OrderMachine.States(), f.Status):
		return "", nil, false // no order has it
	case f.Status == orderpay.OrderPendingPayment:
		// The open orders, on their partial indexes: a few, whatever the history.
		where = append(where, `status = 'PENDING_PAYMENT'`)
	default:
		// The status is written in, one of a few known words, not bound (PostgreSQL plans
		// for it from its statistics; a generic plan of status = $1 expects a seventh of
		// the orders), and as a range of one value, not an equality, which the planners would take as a constant and
		// drop from the order. Ordered by status first, the page is the newest entries of
		// orders_by_status (status, created_at) and nothing else can give it: a walk of
		// orders_by_created would have to sort every match. Given the choice, PostgreSQL
		// takes that walk for a common status, the heap being in creation order and the
		// status's rows spread over it; but the newest orders are the ones not yet
		// completed (paid, shipped), and the walk would pass all of them first, and for a
		// rare status the whole history. The condition of orders_by_status is repeated:
		// SQLite uses a partial index only for a query that states its condition.
		s := `'` + string(f.Status) + `'`
		where = append(where, `status >= `+s+` AND status <= `+s+` AND status <> 'PENDING_PAYMENT'`)
		order = `status DESC, ` + order
	}
	query = `SELECT ` + orderColumns + ` FROM orders`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, ` AND `)
	}
	return query + ` ORDER BY ` + order + ` LIMIT ?`, args, true
}

// prefixRange is the range of the strings that begin with prefix, in byte order (which is
// the order of code points in UTF-8): lo <= s < hi, or lo <= s when hi is "" (no string
// above). hi is prefix with its last code point replaced by the next one, after dropping
// trailing U+10FFFF, which has none. ok is false for a prefix no stored text can begin
// with: not valid UTF-8, or holding NUL (PostgreSQL's text refuses both; an order number
// has neither).
func prefixRange(prefix string) (lo, hi string, ok bool) {
	if !utf8.ValidString(prefix) || strings.IndexByte(prefix, 0) >= 0 {
		return "", "", false
	}
	runes := []rune(prefix)
	for i := len(runes) - 1; i >= 0; i-- {
		next := runes[i] + 1
		if next == 0xD800 { // surrogates are no code points of UTF-8 text
			next = 0xE000
		}
		if next <= utf8.MaxRune {
			return prefix, string(runes[:i]) + string(next), true
		}
	}
	return prefix, "", true
}
