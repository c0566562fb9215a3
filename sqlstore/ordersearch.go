package sqlstore

import (
	"slices"
	"strconv"
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

// ordersQuery is the statement Orders runs for f and a page of limit orders, and its
// arguments. ok is false when no order can match (a prefix that is not valid text): there
// is nothing to run.
//
// PostgreSQL plans a prepared statement for its arguments five times, then keeps a generic
// plan only if it costs no more than theirs. The generic plan of a range over a big table
// expects a share of its rows, so on a shop with a history it never wins, and every search
// is planned again: a tenth of a millisecond the same search on a young shop does not pay.
// So what can be is not bound: a search by status alone, or the newest orders, has its
// status and page size written in (a few known words, a number the code chose) and is
// planned once; and a whole order number is looked up by equality on the primary key (at
// most one row, whose generic plan expects one): both numbering schemes make
// OrderNoDigits digits, so a number that long is the one order that has it. The start of a
// number is written in too (digits cannot break out of a quoted literal): each prefix is
// then a statement of its own, planned once on each connection, which a search repeated
// or paged through reuses. A search by a buyer, or by a prefix of other characters, keeps
// its page size bound: given a page of a known size, the generic plan of a buyer's orders
// would sort all of them, which for a buyer with thousands is the history again.
func (d *dialect) ordersQuery(f orderpay.OrderFilter, limit int) (query string, args []any, ok bool) {
	var where []string
	order := `created_at DESC, order_no DESC`
	whole := orderpay.WholeOrderNo(f.NoPrefix)
	switch {
	case whole:
		where, args = append(where, `order_no = ?`), append(args, f.NoPrefix)
	case f.NoPrefix != "":
		lo, hi, ok := prefixRange(f.NoPrefix)
		if !ok {
			return "", nil, false
		}
		no := `order_no` + d.bytewise
		// The start of a number, digits (and the ':' after 9 its end may be), is written
		// in: no quote or backslash can be among them.
		bound := func(op, v string) {
			if strings.Trim(v, "0123456789:") == "" {
				where = append(where, no+` `+op+` '`+v+`'`)
			} else {
				where, args = append(where, no+` `+op+` ?`), append(args, v)
			}
		}
		bound(">=", lo)
		if hi != "" {
			bound("<", hi)
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
	switch {
	case whole:
		return query, args, true // one order or none: nothing to sort or cut
	case len(args) == 0:
		return query + ` ORDER BY ` + order + ` LIMIT ` + strconv.Itoa(max(limit, 1)), args, true
	}
	return query + ` ORDER BY ` + order + ` LIMIT ?`, append(args, limit), true
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
