package sqlstore

import (
	"cmp"
	"context"
	"crypto/md5"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"modernc.org/sqlite"

	"orderpay"
)

// historyCodesMigration is the migration that keeps the history in small codes
// (transitions, history_moves, and history as a view of them).
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
			return int64(entityKey(s[0], s[1])), nil
		})
}

// entityKey is the 32-bit key a transition of entity number no is indexed by: the first 4
// bytes of MD5(entity ":" no), big-endian, as a signed number. PostgreSQL computes the same
// with md5() (postgresEntityKey). Keys of different entities may be equal: the timeline
// compares the entity and its number too, so a collision costs a row read, no more.
func entityKey(entity, no string) int32 {
	var buf [96]byte
	b := append(append(append(buf[:0], entity...), ':'), no...)
	sum := md5.Sum(b)
	return int32(binary.BigEndian.Uint32(sum[:4]))
}

// postgresEntityKey is entityKey of the text expressions entity and no, in PostgreSQL.
func postgresEntityKey(entity, no string) string {
	return fmt.Sprintf(`('x' || substr(md5(%s || ':' || %s), 1, 8))::bit(32)::integer`, entity, no)
}

// historyView shows the transitions as history had them, names and all: migration 0031's.
const historyView = `CREATE VIEW history AS
	SELECT t.seq, m.entity, t.entity_no, m.from_status, m.to_status, m.event, t.actor, t.reason, t.at
	FROM transitions t JOIN history_moves m ON m.code = t.move`

// historyPhrasesMigration is the migration that lets a move stand for its fixed actor and
// reason too (historyPhrasesSteps).
const historyPhrasesMigration = 34

// historyPhrasesView is historyView since migration 0034: the move's words, then the row's.
const historyPhrasesView = `CREATE VIEW history AS
	SELECT t.seq, m.entity, t.entity_no, m.from_status, m.to_status, m.event, m.actor || t.actor AS actor,
		m.reason || t.reason AS reason, t.at
	FROM transitions t JOIN history_moves m ON m.code = t.move`

// historyPhrasesSteps give history_moves its actor and reason, its key the six columns,
// and make the view again (migration 0034). PostgreSQL alters the table; SQLite, which
// cannot change a table's UNIQUE, copies it, each move keeping its code.
func historyPhrasesSteps(d *dialect) []string {
	if d == postgresDialect {
		return []string{
			`ALTER TABLE history_moves ADD COLUMN actor TEXT NOT NULL DEFAULT '', ADD COLUMN reason TEXT NOT NULL DEFAULT ''`,
			`ALTER TABLE history_moves DROP CONSTRAINT history_moves_entity_from_status_to_status_event_key`,
			`ALTER TABLE history_moves ADD CONSTRAINT history_moves_key UNIQUE (entity, from_status, to_status, event, actor, reason)`,
			historyPhrasesView,
		}
	}
	return []string{
		`CREATE TABLE history_moves_0034 (
			code        ` + d.code16 + `,
			entity      TEXT NOT NULL,
			from_status TEXT NOT NULL,
			to_status   TEXT NOT NULL,
			event       TEXT NOT NULL,
			actor       TEXT NOT NULL DEFAULT '',
			reason      TEXT NOT NULL DEFAULT '',
			UNIQUE (entity, from_status, to_status, event, actor, reason))`,
		`INSERT INTO history_moves_0034 (code, entity, from_status, to_status, event)
			SELECT code, entity, from_status, to_status, event FROM history_moves ORDER BY code`,
		`DROP TABLE history_moves`,
		`ALTER TABLE history_moves_0034 RENAME TO history_moves`,
		historyPhrasesView,
	}
}

// historyCodesSteps copy the history into transitions (migration 0031), each engine
// computing the entity's key its own way, drop the old table, index the key and make the
// view.
func historyCodesSteps(d *dialect) []string {
	key := entityKeyFunction + "(h.entity, h.entity_no)"
	if d == postgresDialect {
		key = postgresEntityKey("h.entity", "h.entity_no")
	}
	out := []string{
		`INSERT INTO transitions (seq, at, entity_key, move, entity_no, actor, reason)
		SELECT h.seq, h.at, ` + key + `, m.code, h.entity_no, h.actor, h.reason
		FROM history h JOIN history_moves m ON m.entity = h.entity AND m.from_status = h.from_status
			AND m.to_status = h.to_status AND m.event = h.event
		ORDER BY h.seq`,
		`DROP TABLE history`,
	}
	if d == postgresDialect {
		// The copy gave each row its seq: the next one follows the last.
		out = append(out, `SELECT setval(pg_get_serial_sequence('transitions', 'seq'), COALESCE(MAX(seq), 0) + 1, false) FROM transitions`)
	}
	out = append(out, `CREATE INDEX transitions_by_entity ON transitions (entity_key)`, historyView)
	if d == postgresDialect {
		out = append(out, `ANALYZE transitions`, `ANALYZE history_moves`)
	}
	return out
}

// historyMove is what a transition's code stands for (history_moves): its entity, states
// and event, and the actor and reason it was written with when those are fixed words
// (phrasesOf), "" when they are the row's own.
type historyMove struct{ entity, from, to, event, actor, reason string }

// foldedActors are the actors that name no one: orderpay's own parts, and a channel's word.
// A transition by anyone else (a buyer, an operator, an app) keeps its actor in its row.
var foldedActors = []string{"system", "payment-center", "merchant", "channel:" + orderpay.ChannelAlipay, "channel:" + orderpay.ChannelWechat}

// maxFoldedMoves bounds the moves a store makes for fixed words: past it, a transition
// whose words have no move yet keeps them in its row. The words folded are orderpay's own,
// a few dozen, but a code is 16 bits, and a channel's answer may say what it likes.
var maxFoldedMoves = 4096

// phrasesOf is what of h's actor and reason its move stands for, and what its row keeps.
// The actor is folded when it names no one; the reason too, when such an actor gave it in
// words alone (no digit: a number, an amount, a trade or a parcel is the row's own). Both
// or neither: a move says who, and a reason without its actor is not a fixed phrase.
func phrasesOf(h *orderpay.HistoryEntry) (move, row [2]string) {
	if !slices.Contains(foldedActors, h.Actor) {
		return [2]string{}, [2]string{h.Actor, h.Reason}
	}
	if strings.ContainsAny(h.Reason, "0123456789") || len(h.Reason) > 120 {
		return [2]string{h.Actor, ""}, [2]string{"", h.Reason}
	}
	return [2]string{h.Actor, h.Reason}, [2]string{}
}

// movesOf are h's moves: folded, with the words phrasesOf folds, and the actor and reason
// its row then keeps; and plain, with no words, its row keeping them all (a transition
// whose folded move has no code, past maxFoldedMoves, is written so). A move is given a
// code as one or the other, never both for one transition (resolveMoves).
func movesOf(h *orderpay.HistoryEntry) (folded historyMove, row [2]string, plain historyMove) {
	move, row := phrasesOf(h)
	plain = historyMove{entity: h.Entity, from: h.From, to: h.To, event: h.Event}
	folded = plain
	folded.actor, folded.reason = move[0], move[1]
	return folded, row, plain
}

// historyMoves caches the codes of history_moves. A code once given never changes, but a
// code given in a transaction that is then rolled back is not given (the next transaction
// may give it to another move): only codes read from committed rows are kept here. A
// transaction keeps those it read or gave itself in its writeBatch until it commits
// (Store.InTx).
type historyMoves struct {
	codes sync.Map     // historyMove → int16
	count atomic.Int64 // how many moves codes holds
	// pool, on PostgreSQL, is where a move not seen before is given its code, each
	// statement committing on its own: in the writing transaction, a second writer of the
	// same new move would wait for the first to commit, whatever either then does (two
	// refunds of one attempt met there, not on the attempt's row). A code given for a
	// transaction that then rolls back stays given, unused. SQLite has one writer: there
	// the writing transaction gives it.
	pool *sql.DB
}

// load reads every code of history_moves (committed ones: on the pool). noWords is for an
// upgrade test's older store, whose moves have no actor and reason yet.
func (n *historyMoves) load(ctx context.Context, db *sql.DB, noWords bool) error {
	words := `actor, reason`
	if noWords {
		words = `'', ''`
	}
	rows, err := db.QueryContext(ctx, `SELECT code, entity, from_status, to_status, event, `+words+` FROM history_moves`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var code int16
		var m historyMove
		if err := rows.Scan(&code, &m.entity, &m.from, &m.to, &m.event, &m.actor, &m.reason); err != nil {
			return err
		}
		n.store(m, code)
	}
	return rows.Err()
}

// learn keeps the codes a committed transaction read or gave.
func (n *historyMoves) learn(codes map[historyMove]int16) {
	for m, code := range codes {
		n.store(m, code)
	}
}

// store keeps m's code.
func (n *historyMoves) store(m historyMove, code int16) {
	if _, had := n.codes.Swap(m, code); !had {
		n.count.Add(1)
	}
}

// moveCode is m's code, if the store or this transaction knows it.
func (q *queries) moveCode(m historyMove) (int16, bool) {
	if c, ok := q.moves.codes.Load(m); ok {
		return c.(int16), true
	}
	if q.batch != nil {
		c, ok := q.batch.moves[m]
		return c, ok
	}
	return 0, false
}

// resolveMoves makes sure each move of entries has a code the transaction knows: from
// memory, but for a move not seen before, read (or given) in the database.
func (q *queries) resolveMoves(ctx context.Context, entries []orderpay.HistoryEntry) error {
	var missing []historyMove
	for i := range entries {
		m, _, plain := movesOf(&entries[i])
		if _, ok := q.moveCode(m); ok {
			continue
		}
		if m != plain && q.moves.count.Load() >= int64(maxFoldedMoves) {
			// No new move for these words: the row keeps them (writeHistoryInsert).
			m = plain
			if _, ok := q.moveCode(m); ok {
				continue
			}
		}
		if !slices.Contains(missing, m) {
			missing = append(missing, m)
		}
	}
	// In one order: two transactions giving the same new moves on PostgreSQL, the second
	// waits for the first at its first move, and never holds one the first waits for.
	slices.SortFunc(missing, func(a, b historyMove) int {
		return cmp.Or(cmp.Compare(a.entity, b.entity), cmp.Compare(a.from, b.from), cmp.Compare(a.to, b.to), cmp.Compare(a.event, b.event),
			cmp.Compare(a.actor, b.actor), cmp.Compare(a.reason, b.reason))
	})
	for _, m := range missing {
		if q.moves.pool != nil {
			code, err := giveMoveCode(ctx, m, func(query string, args ...any) *sql.Row {
				return q.moves.pool.QueryRowContext(ctx, q.d.rebind(query), args...)
			}, func(query string, args ...any) error {
				_, err := q.moves.pool.ExecContext(ctx, q.d.rebind(query), args...)
				return err
			})
			if err != nil {
				return err
			}
			q.moves.store(m, code)
			continue
		}
		code, err := giveMoveCode(ctx, m, func(query string, args ...any) *sql.Row { return q.row(ctx, query, args...) },
			func(query string, args ...any) error { _, err := q.exec(ctx, query, args...); return err })
		if err != nil {
			return err
		}
		if q.batch == nil {
			// Outside a transaction each statement commits on its own: the code is.
			q.moves.store(m, code)
			continue
		}
		if q.batch.moves == nil {
			q.batch.moves = map[historyMove]int16{}
		}
		q.batch.moves[m] = code
	}
	return nil
}

// giveMoveCode reads m's code in history_moves, giving it the next one if it has none. Two
// transactions giving a code to one move at once on PostgreSQL: the second waits for the
// first, does nothing if the first committed, and reads the first's code.
func giveMoveCode(ctx context.Context, m historyMove, row func(string, ...any) *sql.Row, exec func(string, ...any) error) (int16, error) {
	for range 3 {
		var code int64
		err := row(`SELECT code FROM history_moves WHERE entity = ? AND from_status = ? AND to_status = ? AND event = ?
			AND actor = ? AND reason = ?`, m.entity, m.from, m.to, m.event, m.actor, m.reason).Scan(&code)
		if err == nil {
			if code < 1 || code > math.MaxInt16 {
				return 0, fmt.Errorf("sqlstore: history move %+v has code %d, out of range", m, code)
			}
			return int16(code), nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return 0, err
		}
		if err := exec(`INSERT INTO history_moves (entity, from_status, to_status, event, actor, reason) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT DO NOTHING`, m.entity, m.from, m.to, m.event, m.actor, m.reason); err != nil {
			return 0, err
		}
	}
	return 0, fmt.Errorf("sqlstore: no code for the history move %+v", m)
}

// writeHistoryInsert writes the INSERT of entries into transitions to sb and returns args
// with its arguments appended. Every move of entries has a code (resolveMoves).
func (q *queries) writeHistoryInsert(sb *strings.Builder, entries []orderpay.HistoryEntry, args []any) []any {
	sb.WriteString(`INSERT INTO transitions (at, entity_key, move, entity_no, actor, reason) VALUES `)
	for i, h := range entries {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString("(?, ?, ?, ?, ?, ?)")
		folded, row, plain := movesOf(&h)
		code, ok := q.moveCode(folded)
		if !ok {
			code, _ = q.moveCode(plain)
			row = [2]string{h.Actor, h.Reason}
		}
		args = append(args, ms(h.At), entityKey(h.Entity, h.EntityNo), code, h.EntityNo, row[0], row[1])
	}
	return args
}

// historyQuery reads the timeline of an entity (its key, name and number).
const historyQuery = `SELECT t.seq, t.entity_no, m.from_status, m.to_status, m.event, m.actor || t.actor, m.reason || t.reason, COALESCE(r.raw, ''), t.at
	FROM transitions t JOIN history_moves m ON m.code = t.move LEFT JOIN history_raw r ON r.seq = t.seq
	WHERE t.entity_key = ? AND m.entity = ? AND t.entity_no = ? ORDER BY t.seq`

// History is the timeline of entity number no, oldest first, each transition with its raw
// answer if it had one: on the entity's key (transitions_by_entity).
func (q *queries) History(ctx context.Context, entity, no string) ([]orderpay.HistoryEntry, error) {
	if err := q.flushHistory(ctx); err != nil {
		return nil, err
	}
	rows, err := q.rows(ctx, historyQuery, entityKey(entity, no), entity, no)
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

// EntityKeySQL is the SQL expression, on this store's engine, of a transition's entity key
// (entityKey) from the text expressions entity and no: for tools that write transitions
// in bulk (`bench --history`'s copies of past orders).
func (s *Store) EntityKeySQL(entity, no string) string {
	if s.d == postgresDialect {
		return postgresEntityKey(entity, no)
	}
	return entityKeyFunction + "(" + entity + ", " + no + ")"
}
