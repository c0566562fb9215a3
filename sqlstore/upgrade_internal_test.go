package sqlstore

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"orderpay"
)

// A store an older release left, with the raw channel answers in the history rows, is
// upgraded in place: every raw answer is still read with its transition, and history no
// longer has the column.
func TestUpgradeMovesRawAnswersBesideTheirTransitions(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	migrateThrough = 19
	s, err := Open(ctx, path)
	migrateThrough = 0
	if err != nil {
		t.Fatal(err)
	}
	for i, raw := range []string{"the channel's answer", "", "another answer"} {
		if _, err := s.db.ExecContext(ctx, `INSERT INTO history (entity, entity_no, from_status, to_status, event, actor, reason, raw, at)
			VALUES ('channel_order', 'T1', 'CREATED', 'PAYING', 'submit', 'system', '', ?, ?)`, raw, 1000+i); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()

	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h, err := s.History(ctx, orderpay.EntityChannelOrder, "T1")
	if err != nil || len(h) != 3 || h[0].Raw != "the channel's answer" || h[1].Raw != "" || h[2].Raw != "another answer" {
		t.Fatalf("history after the upgrade %+v, %v", h, err)
	}
	var cols []string
	rows, err := s.db.QueryContext(ctx, `SELECT name FROM pragma_table_info('history')`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var c string
		rows.Scan(&c)
		cols = append(cols, c)
	}
	rows.Close()
	if strings.Contains(strings.Join(cols, ","), "raw") {
		t.Fatalf("history still has columns %v", cols)
	}
	// New transitions keep their raw answer too.
	if err := s.InTx(ctx, func(tx orderpay.Tx) error {
		return tx.(*queries).appendHistory(ctx, orderpay.HistoryEntry{Entity: orderpay.EntityChannelOrder, EntityNo: "T1",
			From: "PAYING", To: "SUCCESS", Event: "notify", Actor: "system", Raw: "a third answer", At: orderpay.FromMillis(2000)})
	}); err != nil {
		t.Fatal(err)
	}
	if h, err := s.History(ctx, orderpay.EntityChannelOrder, "T1"); err != nil || len(h) != 4 || h[3].Raw != "a third answer" {
		t.Fatalf("history after a new transition %+v, %v", h, err)
	}
}
