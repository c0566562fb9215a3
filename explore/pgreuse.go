package explore

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"orderpay/sqlstore"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// pgSnapshot is what a PostgreSQL template database holds: the rows of each table, in
// COPY's text form, and where each sequence stands. A case database made from the template
// is put back to it (pgReset) for the next case, instead of being dropped and made again.
type pgSnapshot struct {
	tables []string          // every table of the schema
	rows   map[string][]byte // COPY text of the tables that hold rows
	seqs   []pgSequence
}

type pgSequence struct {
	name  string
	start int64
	last  sql.NullInt64 // null: never drawn from
}

// rawConn runs fn on one pgx connection of dsn, opened for it.
func rawConn(ctx context.Context, dsn string, fn func(*pgconn.PgConn) error) error {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	return onPgConn(ctx, db, fn)
}

// onPgConn runs fn on one pgx connection of db's pool.
func onPgConn(ctx context.Context, db *sql.DB, fn func(*pgconn.PgConn) error) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error { return fn(dc.(*stdlib.Conn).Conn().PgConn()) })
}

// query runs q on pc and returns its rows as text.
func query(ctx context.Context, pc *pgconn.PgConn, q string) ([][]string, error) {
	res, err := pc.Exec(ctx, q).ReadAll()
	if err != nil {
		return nil, err
	}
	var out [][]string
	for _, r := range res {
		for _, row := range r.Rows {
			cells := make([]string, len(row))
			for i, c := range row {
				cells[i] = string(c)
			}
			out = append(out, cells)
		}
	}
	return out, nil
}

// snapshot reads what the database at dsn holds in its search path's first schema.
func snapshot(ctx context.Context, dsn string) (*pgSnapshot, error) {
	snap := &pgSnapshot{rows: map[string][]byte{}}
	err := rawConn(ctx, dsn, func(pc *pgconn.PgConn) error {
		tables, err := query(ctx, pc, `SELECT quote_ident(c.relname) FROM pg_class c
			WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema()) AND c.relkind = 'r' ORDER BY c.relname`)
		if err != nil {
			return err
		}
		for _, t := range tables {
			snap.tables = append(snap.tables, t[0])
		}
		for _, t := range snap.tables {
			var b bytes.Buffer
			if _, err := pc.CopyTo(ctx, &b, "COPY "+t+" TO STDOUT"); err != nil {
				return err
			}
			if b.Len() > 0 {
				snap.rows[t] = b.Bytes()
			}
		}
		seqs, err := query(ctx, pc, `SELECT quote_ident(sequencename), start_value, COALESCE(last_value::text, '') FROM pg_sequences WHERE schemaname = current_schema()`)
		if err != nil {
			return err
		}
		for _, s := range seqs {
			q := pgSequence{name: s[0]}
			if _, err := fmt.Sscan(s[1], &q.start); err != nil {
				return err
			}
			if s[2] != "" {
				if _, err := fmt.Sscan(s[2], &q.last.Int64); err != nil {
					return err
				}
				q.last.Valid = true
			}
			snap.seqs = append(snap.seqs, q)
		}
		return nil
	})
	return snap, err
}

// pgReset puts the database pc is connected to back as snap found its template, in one
// transaction: every table emptied and given the template's rows, every sequence where it
// stood. The rows deleted stay as dead ones until autovacuum comes: what a case reads is
// the same.
func pgReset(ctx context.Context, pc *pgconn.PgConn, snap *pgSnapshot) error {
	// DELETE rather than TRUNCATE: a case leaves a few rows, and TRUNCATE makes new files
	// for every table and index (some 0.2 s a case). Triggers are off (a deleted order
	// would count itself out of the status counts, and a foreign key would want its tables
	// in order): that takes a superuser, and without one the reset fails and the database
	// is dropped instead.
	var q strings.Builder
	q.WriteString("BEGIN; SET LOCAL session_replication_role = replica;")
	for _, t := range snap.tables {
		q.WriteString(" DELETE FROM " + t + ";")
	}
	for _, s := range snap.seqs {
		if s.last.Valid {
			fmt.Fprintf(&q, " SELECT setval('%s', %d, true);", s.name, s.last.Int64)
		} else {
			fmt.Fprintf(&q, " SELECT setval('%s', %d, false);", s.name, s.start)
		}
	}
	if _, err := pc.Exec(ctx, q.String()).ReadAll(); err != nil {
		_, _ = pc.Exec(ctx, "ROLLBACK").ReadAll()
		return err
	}
	for _, t := range snap.tables {
		if rows, ok := snap.rows[t]; ok {
			if _, err := pc.CopyFrom(ctx, bytes.NewReader(rows), "COPY "+t+" FROM STDIN"); err != nil {
				_, _ = pc.Exec(ctx, "ROLLBACK").ReadAll()
				return err
			}
		}
	}
	_, err := pc.Exec(ctx, "COMMIT").ReadAll()
	return err
}

// pgSlot is a case database of a template's, free for the next case, and the stores the
// case before left open on it, whose sessions the next case's instances take: a new
// session costs the server more than most cases do (it starts a process, and fills its
// catalogue caches and plans its statements again).
type pgSlot struct {
	name   string
	stores []*sqlstore.Store
}

// putBack ends w, a case's world on slot's database, and makes the database ready for the
// next case: reset to the template, with the case's stores kept open when every session on
// the database is theirs and idle. Otherwise (an operation a crash left holding a
// transaction, a store not given back) every session on it is ended first, and the next
// case opens its own. A reset that fails, and the database is dropped.
func (e *Explorer) putBack(w *World, slot *pgSlot, tpl *templateDB) {
	ctx := context.Background()
	var kept []*sqlstore.Store
	whole := true
	for _, in := range w.inst {
		if st := in.keep(); st != nil {
			kept = append(kept, st)
		} else {
			whole = false
		}
	}
	w.Close()
	if !whole || !e.onlySessions(ctx, slot.name, kept) {
		closeAll(kept)
		kept = nil
	}
	err := func() error {
		if tpl.snap == nil {
			return fmt.Errorf("explore: no snapshot of %s", tpl.dsn)
		}
		reset := func(pc *pgconn.PgConn) error { return pgReset(ctx, pc, tpl.snap) }
		if kept == nil {
			if _, err := e.admin.ExecContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, slot.name); err != nil {
				return err
			}
			return rawConn(ctx, withDatabase(e.PG, slot.name), reset)
		}
		return onPgConn(ctx, kept[0].DB(), reset)
	}()
	if err != nil {
		// Not reusable: dropped (Close drops it anyway if this fails too).
		closeAll(kept)
		e.admin.Exec(`DROP DATABASE IF EXISTS ` + slot.name + ` WITH (FORCE)`)
		return
	}
	slot.stores = kept
	e.mu.Lock()
	tpl.free = append(tpl.free, slot)
	e.mu.Unlock()
}

// onlySessions waits, a little, until every session on the database name is one of the
// stores' connections, and idle: none in use, and as many sessions on the server, all
// idle, as the stores have open (a connection a store closed ends its session a moment
// later).
func (e *Explorer) onlySessions(ctx context.Context, name string, stores []*sqlstore.Store) bool {
	for range 50 {
		open, inUse := 0, 0
		for _, st := range stores {
			o, u := st.Connections()
			open, inUse = open+o, inUse+u
		}
		var sessions, busy int
		err := e.admin.QueryRowContext(ctx, `SELECT count(*), count(*) FILTER (WHERE state IS DISTINCT FROM 'idle') FROM pg_stat_activity WHERE datname = $1`, name).Scan(&sessions, &busy)
		if err != nil {
			return false
		}
		if inUse == 0 && busy == 0 && sessions == open {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// dropPG drops slot's database, and closes the stores left open on it.
func (e *Explorer) dropPG(slot *pgSlot) {
	closeAll(slot.stores)
	slot.stores = nil
	e.admin.Exec(`DROP DATABASE IF EXISTS ` + slot.name + ` WITH (FORCE)`)
}
