package sqlstore

import (
	"context"
	"crypto/md5"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"

	"modernc.org/sqlite"

	"orderpay"
)

// historyCodesMigration is the migration that keeps the history in small codes
// (transitions, history_names, and history as a view of them).
const historyCodesMigration = 31

// entityKeyFunction is the SQLite function the store registers that gives entityKey's
// answer, for the migration that computes the key of the rows already there.
const entityKeyFunction = "orderpay_entity_key"

func init() {
	sqlite.MustRegisterDeterministicScalarFunction(entityKeyFunction, 2,
		func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
			var s [2]string
			for i, a := range args {
				switch v := a.(type) {
				case string:
					s[i] = v
				case []byte:
					s[i] = string(v)
				default:
					return nil, fmt.Errorf("%s: argument %d is %T, not text", entityKeyFunction, i+1, a)
				}
			}
			return entityKey(s[0], s[1]), nil
		})
}

// entityKey is the 64-bit key a transition of entity number no is indexed by: the first 8
// bytes of MD5(entity ":" no), big-endian, as a signed number. PostgreSQL computes the same
// with md5() (postgresEntityKey); a collision is harmless, the timeline compares the entity
// and its number too.
func entityKey(entity, no string) int64 {
	var buf [96]byte
	b := append(append(append(buf[:0], entity...), ':'), no...)
	sum := md5.Sum(b)
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// postgresEntityKey is entityKey of the text expressions entity and no, in PostgreSQL.
func postgresEntityKey(entity, no string) string {
	return fmt.Sprintf(`('x' || substr(md5(%s || ':' || %s), 1, 16))::bit(64)::bigint`, entity, no)
}

// historyView shows the transitions as history had them, names and all.
const historyView = `CREATE VIEW history AS
	SELECT t.seq, e.name AS entity, t.entity_no, f.name AS from_status, s.name AS to_status, v.name AS event,
		t.actor, t.reason, t.at
	FROM transitions t JOIN history_names e ON e.code = t.entity JOIN history_names f ON f.code = t.from_status
		JOIN history_names s ON s.code = t.to_status JOIN history_names v ON v.code = t.event`

// historyCodesSteps copy the history into transitions (migration 0031), each engine
// computing the entity's key its own way, drop the old table, index the key and make the
// view.
func historyCodesSteps(d *dialect) []string {
	key := entityKeyFunction + "(h.entity, h.entity_no)"
	if d == postgresDialect {
		key = postgresEntityKey("h.entity", "h.entity_no")
	}
	out := []string{
		`INSERT INTO transitions (seq, entity_key, at, entity, from_status, to_status, event, entity_no, actor, reason)
		SELECT h.seq, ` + key + `, h.at, e.code, f.code, s.code, v.code, h.entity_no, h.actor, h.reason
		FROM history h JOIN history_names e ON e.name = h.entity JOIN history_names f ON f.name = h.from_status
			JOIN history_names s ON s.name = h.to_status JOIN history_names v ON v.name = h.event
		ORDER BY h.seq`,
		`DROP TABLE history`,
	}
	if d == postgresDialect {
		// The copy gave each row its seq: the next one follows the last.
		out = append(out, `SELECT setval(pg_get_serial_sequence('transitions', 'seq'), COALESCE(MAX(seq), 0) + 1, false) FROM transitions`)
	}
	out = append(out, `CREATE INDEX transitions_by_entity ON transitions (entity_key)`, historyView)
	if d == postgresDialect {
		out = append(out, `ANALYZE transitions`, `ANALYZE history_names`)
	}
	return out
}

// historyNames caches the codes of history_names, name to code. A code once given never
// changes, but a code given in a transaction that is then rolled back is not given: only
// codes read from committed rows are kept here. A transaction keeps those it read or gave
// itself in its writeBatch until it commits (Store.InTx).
type historyNames struct {
	codes sync.Map // string → int16
}

// load reads every code of history_names (committed ones: on the pool).
func (n *historyNames) load(ctx context.Context, db *sql.DB) error {
	rows, err := db.QueryContext(ctx, `SELECT code, name FROM history_names`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var code int16
		var name string
		if err := rows.Scan(&code, &name); err != nil {
			return err
		}
		n.codes.Store(name, code)
	}
	return rows.Err()
}

// learn keeps the codes a committed transaction read or gave.
func (n *historyNames) learn(codes map[string]int16) {
	for name, code := range codes {
		n.codes.Store(name, code)
	}
}

// historyCode is name's code, if the store or this transaction knows it.
func (q *queries) historyCode(name string) (int16, bool) {
	if c, ok := q.names.codes.Load(name); ok {
		return c.(int16), true
	}
	if q.batch != nil {
		c, ok := q.batch.names[name]
		return c, ok
	}
	return 0, false
}

// resolveNames makes sure each name of entries has a code the transaction knows: from
// memory, but for a name not seen before, read (or given) in the database.
func (q *queries) resolveNames(ctx context.Context, entries []orderpay.HistoryEntry) error {
	for i := range entries {
		h := &entries[i]
		for _, name := range [4]string{h.Entity, h.From, h.To, h.Event} {
			if _, ok := q.historyCode(name); ok {
				continue
			}
			code, err := q.giveHistoryCode(ctx, name)
			if err != nil {
				return err
			}
			if q.batch == nil {
				// Outside a transaction each statement commits on its own: the code is.
				q.names.codes.Store(name, code)
				continue
			}
			if q.batch.names == nil {
				q.batch.names = map[string]int16{}
			}
			q.batch.names[name] = code
		}
	}
	return nil
}

// giveHistoryCode reads name's code in history_names, giving it the next one if it has
// none. Two transactions giving a code at once on PostgreSQL: the second waits for the
// first, does nothing if the first took that code, and reads again.
func (q *queries) giveHistoryCode(ctx context.Context, name string) (int16, error) {
	for range 10 {
		var code int64
		err := q.row(ctx, `SELECT code FROM history_names WHERE name = ?`, name).Scan(&code)
		if err == nil {
			if code < 1 || code > math.MaxInt16 {
				return 0, fmt.Errorf("sqlstore: history name %q has code %d, out of range", name, code)
			}
			return int16(code), nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return 0, err
		}
		// WHERE true: SQLite would read ON CONFLICT as a join's without it.
		if _, err := q.exec(ctx, `INSERT INTO history_names (code, name)
			SELECT COALESCE(MAX(code), 0) + 1, CAST(? AS TEXT) FROM history_names WHERE true ON CONFLICT DO NOTHING`, name); err != nil {
			return 0, err
		}
	}
	return 0, fmt.Errorf("sqlstore: no code for the history name %q after 10 tries", name)
}

// writeHistoryInsert writes the INSERT of entries into transitions to sb and returns args
// with its arguments appended. Every name of entries has a code (resolveNames).
func (q *queries) writeHistoryInsert(sb *strings.Builder, entries []orderpay.HistoryEntry, args []any) []any {
	sb.WriteString(`INSERT INTO transitions (entity_key, at, entity, from_status, to_status, event, entity_no, actor, reason) VALUES `)
	for i, h := range entries {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?)")
		args = append(args, q.historyArgs(h)...)
	}
	return args
}

// historyArgs are the columns of h's row in transitions, in writeHistoryInsert's order.
func (q *queries) historyArgs(h orderpay.HistoryEntry) []any {
	code := func(name string) int16 {
		c, _ := q.historyCode(name)
		return c
	}
	return []any{entityKey(h.Entity, h.EntityNo), ms(h.At), code(h.Entity), code(h.From), code(h.To), code(h.Event),
		h.EntityNo, h.Actor, h.Reason}
}

// History is the timeline of entity number no, oldest first, each transition with its raw
// answer if it had one: on the entity's key (transitions_by_entity).
func (q *queries) History(ctx context.Context, entity, no string) ([]orderpay.HistoryEntry, error) {
	if err := q.flushHistory(ctx); err != nil {
		return nil, err
	}
	rows, err := q.rows(ctx, `SELECT t.seq, t.entity_no, f.name, s.name, v.name, t.actor, t.reason, COALESCE(r.raw, ''), t.at
		FROM transitions t JOIN history_names e ON e.code = t.entity JOIN history_names f ON f.code = t.from_status
			JOIN history_names s ON s.code = t.to_status JOIN history_names v ON v.code = t.event
			LEFT JOIN history_raw r ON r.seq = t.seq
		WHERE t.entity_key = ? AND e.name = ? AND t.entity_no = ? ORDER BY t.seq`, entityKey(entity, no), entity, no)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []orderpay.HistoryEntry
	for rows.Next() {
		h := orderpay.HistoryEntry{Entity: entity}
		var at int64
		if err := rows.Scan(&h.Seq, &h.EntityNo, &h.From, &h.To, &h.Event, &h.Actor, &h.Reason, &h.Raw, &at); err != nil {
			return nil, err
		}
		h.At = orderpay.FromMillis(at)
		out = append(out, h)
	}
	return out, rows.Err()
}
