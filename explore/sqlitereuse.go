package explore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"orderpay/sqlstore"
)

// sqliteSnapshot is what a SQLite template database holds, as SQL that puts it back: the
// rows of each table, as literals (quote: the same types and bytes), in rowid order. A
// case database made from the template is put back to it (sqliteSlot.reset) for the next case,
// with its store's connections still open: a new connection parses the whole schema, and
// a new store prepares its statements on each, which cost more than most cases.
type sqliteSnapshot struct {
	// counted are the tables with triggers (the status counts, the charts), put back
	// first: their triggers write to the others, which are put back after them.
	counted, others []sqliteTable
}

type sqliteTable struct {
	name   string
	insert string // "" when the template's table is empty
}

// sqliteSnap reads the template database at path.
func sqliteSnap(ctx context.Context, path string) (*sqliteSnapshot, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	// sqlite_sequence (the AUTOINCREMENT tables' last ids) last: every insert before it
	// moves it. SQLite's other tables of its own are not put back.
	names, err := column(ctx, db, `SELECT name FROM sqlite_master WHERE type = 'table'
		AND (name NOT LIKE 'sqlite\_%' ESCAPE '\' OR name = 'sqlite_sequence') ORDER BY name = 'sqlite_sequence', name`)
	if err != nil {
		return nil, err
	}
	triggered, err := column(ctx, db, `SELECT DISTINCT tbl_name FROM sqlite_master WHERE type = 'trigger'`)
	if err != nil {
		return nil, err
	}
	snap := &sqliteSnapshot{}
	for _, name := range names {
		t, err := sqliteTableSnap(ctx, db, name)
		if err != nil {
			return nil, fmt.Errorf("explore: snapshot of %s: %w", name, err)
		}
		if contains(triggered, name) {
			snap.counted = append(snap.counted, t)
		} else {
			snap.others = append(snap.others, t)
		}
	}
	return snap, nil
}

// column is the first column of q's rows, as text.
func column(ctx context.Context, db *sql.DB, q string, args ...any) ([]string, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// sqliteTableSnap is the INSERT that gives table name the rows it holds now: every
// column as a literal, and the rowid where no column names it (so that a scan reads the
// rows in the same order).
func sqliteTableSnap(ctx context.Context, db *sql.DB, name string) (sqliteTable, error) {
	t := sqliteTable{name: quoteIdent(name)}
	rows, err := db.QueryContext(ctx, `SELECT name, type, pk FROM pragma_table_info(?) ORDER BY cid`, name)
	if err != nil {
		return t, err
	}
	var cols []string
	var pks int
	var intPK bool
	for rows.Next() {
		var col, typ string
		var pk int
		if err := rows.Scan(&col, &typ, &pk); err != nil {
			rows.Close()
			return t, err
		}
		cols = append(cols, quoteIdent(col))
		if pk > 0 {
			pks++
			intPK = strings.EqualFold(typ, "INTEGER")
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return t, err
	}
	// A table WITHOUT ROWID has none to select.
	_, noRowid := db.ExecContext(ctx, `SELECT rowid FROM `+t.name+` LIMIT 0`)
	order := ""
	if noRowid == nil {
		order = " ORDER BY rowid"
		if pks != 1 || !intPK {
			cols = append([]string{"rowid"}, cols...)
		}
	}
	quoted := make([]string, len(cols))
	for i, c := range cols {
		quoted[i] = "quote(" + c + ")"
	}
	values, err := column(ctx, db, `SELECT '(' || `+strings.Join(quoted, ` || ',' || `)+` || ')' FROM `+t.name+order)
	if err != nil {
		return t, err
	}
	if len(values) > 0 {
		t.insert = "INSERT INTO " + t.name + " (" + strings.Join(cols, ", ") + ") VALUES " + strings.Join(values, ", ")
	}
	return t, nil
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// reset puts the database under st back as snap found its template, in one transaction
// (nothing may be using st's connections): every table emptied and given the template's
// rows, the tables with triggers first. Then, every checkpointEvery resets, the
// write-ahead log is copied back and emptied, as closing the last connection would have.
//
// It runs on a connection of its own, kept with the slot, on which the foreign keys are
// not enforced: what it leaves is the template, whose keys hold. On one of the store's,
// the foreign keys would have to be deferred, and setting that pragma expires every
// statement prepared on the connection, each then prepared again by the next case (a
// fifth of the explorer's CPU went to that).
func (slot *sqliteSlot) reset(ctx context.Context, snap *sqliteSnapshot) error {
	if slot.conn == nil {
		db, err := sql.Open("sqlite", "file:"+slot.path+"?_pragma=foreign_keys(0)&_pragma=synchronous(NORMAL)&_pragma=busy_timeout(10000)")
		if err != nil {
			return err
		}
		db.SetMaxOpenConns(1)
		slot.conn = db
		// Prepared once: parsing them is most of a reset.
		for _, tables := range [][]sqliteTable{snap.counted, snap.others} {
			for _, t := range tables {
				for _, q := range []string{`DELETE FROM ` + t.name, t.insert} {
					if q == "" {
						continue
					}
					stmt, err := db.PrepareContext(ctx, q)
					if err != nil {
						return fmt.Errorf("explore: reset %s: %w", t.name, err)
					}
					slot.stmts = append(slot.stmts, stmt)
				}
			}
		}
	}
	tx, err := slot.conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, stmt := range slot.stmts {
		if _, err := tx.StmtContext(ctx, stmt).ExecContext(ctx); err != nil {
			return fmt.Errorf("explore: reset: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	if slot.resets++; slot.resets%checkpointEvery != 0 {
		return nil
	}
	var busy, logged, copied int
	if err := slot.conn.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logged, &copied); err != nil {
		return err
	}
	if busy != 0 {
		return fmt.Errorf("explore: the reset's checkpoint was blocked")
	}
	return nil
}

// sqliteSlot is a case database of a template's, with the last case's store on it, its
// connections open, for the next case (sqlstore.Store.Renewed).
type sqliteSlot struct {
	path  string
	store *sqlstore.Store
	// conn is the reset's connection, and stmts its statements, in order.
	conn   *sql.DB
	stmts  []*sql.Stmt
	resets int
}

// checkpointEvery is how many resets of a case database copy its write-ahead log back and
// empty it: a case writes a few dozen pages, and a checkpoint syncs the file.
const checkpointEvery = 32

// closeConn closes the reset's connection.
func (slot *sqliteSlot) closeConn() {
	for _, stmt := range slot.stmts {
		stmt.Close()
	}
	if slot.conn != nil {
		slot.conn.Close()
	}
	slot.stmts, slot.conn = nil, nil
}

// idle waits, a little, until no connection of st is in use: an operation the case
// crashed gives its transaction back a moment after it ended.
func idle(st *sqlstore.Store) bool {
	for range 100 {
		if _, inUse := st.Connections(); inUse == 0 {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}
