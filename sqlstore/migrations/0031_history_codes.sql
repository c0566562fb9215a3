-- History in small codes. A shop's history is most of its database (13.6 transitions per
-- order, 58 % of the bytes at a million orders): every row carried its entity, both states
-- and its event as text, and its index (entity, entity_no, seq) carried the entity and its
-- number as text again, inserted in random order, its pages split and part empty.
--
-- The transitions now live in `transitions`:
--   * move is a 2-byte code of `history_moves`: one code for the entity, from_status,
--     to_status and event together. A shop has a few hundred such moves at most (each
--     machine's transitions and events), where four codes a row would cost 8 bytes and four
--     joins to read. The table is seeded here from the moves the history holds, whatever
--     they are, and extended by the store when it writes a move it has not seen (SQLite's
--     next rowid, PostgreSQL's identity); a code once given never changes.
--   * entity_key is a 32-bit key of the entity and its number: the first 4 bytes of
--     MD5(entity || ':' || entity_no), computed by the store in Go, here by md5() on
--     PostgreSQL and by a function the store registers on SQLite. The index is on that key
--     alone. The timeline reads `WHERE entity_key = ? AND entity = ? AND entity_no = ?`:
--     the entity and its number compared as text make equal keys of two entities harmless
--     (with ten million entities, one lookup in a few hundred reads a row too many).
--   * seq is still the global order of the transitions, and history_raw still points at its
--     row by seq. On SQLite seq is the rowid: the rows are appended in its order, their
--     pages full, and the key's index holds it for free. On PostgreSQL it has no index of
--     its own any more: nothing looks a transition up by seq (history_raw has its own key;
--     the readers that order by seq read an entity's few rows, or the whole table).
--   * the 8-byte columns first, then the key and the code, then the texts: no padding on
--     PostgreSQL.
-- A table clustered on the key (SQLite's WITHOUT ROWID) would drop the index but be filled
-- in random order, its pages part empty as the old index's were, and seq would need a
-- counter of its own: not smaller, and slower to write.
--
-- `history` is now a view that shows the columns it had (seq, entity, entity_no,
-- from_status, to_status, event, actor, reason, at), for the auditor, the explorer and
-- anyone's SQL; the store writes and reads `transitions` itself.
--
-- Measured with 1.29 million rows of 100,000 realistic orders (TestHistoryBytesPerRow), the
-- table and all its indexes: PostgreSQL 235 bytes a row before, 105 after; SQLite 126
-- before, 70 after (docs/design.md §11.1).
--
-- The copy, the old table's drop, the index and the view are migrationExtras (history.go):
-- each engine computes the key its own way. The copy is one INSERT ... SELECT in the
-- migration's transaction, in seq order, the index made after it.
CREATE TABLE history_moves (
    code        {{code16}},
    entity      TEXT     NOT NULL,
    from_status TEXT     NOT NULL,
    to_status   TEXT     NOT NULL,
    event       TEXT     NOT NULL,
    UNIQUE (entity, from_status, to_status, event)
);
INSERT INTO history_moves (entity, from_status, to_status, event)
    SELECT DISTINCT entity, from_status, to_status, event FROM history ORDER BY entity, from_status, to_status, event;
CREATE TABLE transitions (
    seq        {{serial}},
    at         BIGINT   NOT NULL,
    entity_key INTEGER  NOT NULL,
    move       SMALLINT NOT NULL,
    entity_no  TEXT     NOT NULL,
    actor      TEXT     NOT NULL,
    reason     TEXT     NOT NULL DEFAULT ''
);
