package explore

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"strings"

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

// rawConn runs fn on one pgx connection of dsn.
func rawConn(ctx context.Context, dsn string, fn func(*pgconn.PgConn) error) error {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
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

// pgReset puts the database at dsn back as snap found its template, in one transaction:
// every table emptied and given the template's rows, every sequence where it stood. The
// rows deleted stay as dead ones until autovacuum comes: what a case reads is the same.
func pgReset(ctx context.Context, dsn string, snap *pgSnapshot) error {
	return rawConn(ctx, dsn, func(pc *pgconn.PgConn) error {
		// DELETE rather than TRUNCATE: a case leaves a few rows, and TRUNCATE makes new
		// files for every table and index (some 0.2 s a case). Triggers are off (a
		// deleted order would count itself out of the status counts, and a foreign key
		// would want its tables in order): that takes a superuser, and without one the
		// reset fails and the database is dropped instead.
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
	})
}

// putBack makes dbName, a case database of tpl's that its case has closed, ready for the
// next case: its sessions left over are ended and it is reset to the template.
func (e *Explorer) putBack(dbName string, tpl *templateDB) error {
	ctx := context.Background()
	if tpl.snap == nil {
		return fmt.Errorf("explore: no snapshot of %s", tpl.dsn)
	}
	if _, err := e.admin.ExecContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, dbName); err != nil {
		return err
	}
	if err := pgReset(ctx, withDatabase(e.PG, dbName), tpl.snap); err != nil {
		return err
	}
	e.mu.Lock()
	tpl.free = append(tpl.free, dbName)
	e.mu.Unlock()
	return nil
}
