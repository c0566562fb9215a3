package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkReadAfterACommit is what a reader's page cache costs it when another connection
// has committed since its last read (in WAL mode SQLite then throws the cache away), on a
// small file and on one of 300 MB, by the size of the reader's cache (readerCacheKiB): the
// reader once read thousands of pages (a console page's scan), then, in turn, a commit on
// another connection and the reader's two point reads. read-ns/op is the reads alone.
//
//	go test -run '^$' -bench ReadAfterACommit ./sqlstore
func BenchmarkReadAfterACommit(b *testing.B) {
	for _, rows := range []int{2000, 100000} {
		for _, kib := range []int{512, readerCacheKiB, writerCacheKiB} {
			b.Run(fmt.Sprintf("rows=%d/cache=%dKiB", rows, kib), func(b *testing.B) { benchReadAfterACommit(b, rows, kib) })
		}
	}
}

func benchReadAfterACommit(b *testing.B, rows, kib int) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", fmt.Sprintf("file:%s?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=cache_size(-%d)",
		filepath.Join(b.TempDir(), "cache.db"), kib))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	for _, q := range []string{
		`CREATE TABLE big (id INTEGER PRIMARY KEY, v BLOB)`,
		`CREATE TABLE small (id INTEGER PRIMARY KEY, v TEXT)`,
		`CREATE TABLE w (id INTEGER PRIMARY KEY, n INTEGER)`,
		fmt.Sprintf(`WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i < %d) INSERT INTO big SELECT i, randomblob(3000) FROM c`, rows),
		`WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i < 100) INSERT INTO small SELECT i, 'x' FROM c`,
		`INSERT INTO w VALUES (1, 0)`,
		`PRAGMA wal_checkpoint(TRUNCATE)`,
	} {
		_, err := db.ExecContext(ctx, q)
		must(err)
	}
	reader, err := db.Conn(ctx)
	must(err)
	defer reader.Close()
	writer, err := db.Conn(ctx)
	must(err)
	defer writer.Close()
	var n int
	must(reader.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT id FROM big WHERE id % 7 = 0 AND length(v) > 0 LIMIT 8000)`).Scan(&n))
	var reads time.Duration
	b.ResetTimer()
	for i := range b.N {
		_, err := writer.ExecContext(ctx, `UPDATE w SET n = n + 1 WHERE id = 1`)
		must(err)
		began := time.Now()
		var v string
		must(reader.QueryRowContext(ctx, `SELECT v FROM small WHERE id = ?`, 1+i%100).Scan(&v))
		must(reader.QueryRowContext(ctx, `SELECT length(v) FROM big WHERE id = ?`, 1+(i*7919)%rows).Scan(&n))
		reads += time.Since(began)
	}
	b.ReportMetric(float64(reads.Nanoseconds())/float64(b.N), "read-ns/op")
}
