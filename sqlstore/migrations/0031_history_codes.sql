-- History in small codes. A shop's history is most of its database (13.6 transitions per
-- order, 58 % of the bytes at a million orders): every row carried its entity, both states
-- and its event as text, and its index (entity, entity_no, seq) carried the entity and its
-- number as text again, in random order, so its pages were split and part empty.
--
-- The transitions now live in `transitions`:
--   * entity, from_status, to_status and event are 2-byte codes of `history_names`, a
--     dictionary seeded here from the names the history holds and extended by the store
--     when it writes a name it has not seen (a code once given never changes);
--   * entity_key is a 64-bit key of the entity and its number (the first 8 bytes of
--     MD5(entity || ':' || entity_no), computed by the store in Go, here by md5() on
--     PostgreSQL and by a function the store registers on SQLite); the index is on that key
--     alone. The timeline reads `WHERE entity_key = ? AND entity = ? AND entity_no = ?`:
--     the number compared as text makes a collision of keys harmless;
--   * seq is still the global order of the transitions, and history_raw still points at its
--     row by seq. On SQLite seq is the rowid (the key index holds it for free); on
--     PostgreSQL it has no index of its own any more: nothing looks a transition up by seq
--     (history_raw has its own key, and the readers that order by seq read whole entities
--     or the whole table).
--   * the 8-byte columns first, then the codes, then the texts: no padding on PostgreSQL.
-- `history` is now a view that decodes the codes into the columns it had (seq, entity,
-- entity_no, from_status, to_status, event, actor, reason, at), for the auditor, the
-- explorer and anyone's SQL; the store reads and writes `transitions` itself.
--
-- Measured with 200,000 realistic rows (TestHistoryBytesPerRow): see docs/design.md.
--
-- The copy, the old table's drop, the index and the view are migrationSteps (history.go):
-- the key is computed by each engine its own way. The copy is one INSERT ... SELECT in the
-- migration's transaction, the index made after it.
CREATE TABLE history_moves (
    code        SMALLINT NOT NULL PRIMARY KEY,
    entity      TEXT     NOT NULL,
    from_status TEXT     NOT NULL,
    to_status   TEXT     NOT NULL,
    event       TEXT     NOT NULL,
    UNIQUE (entity, from_status, to_status, event)
);
INSERT INTO history_moves (code, entity, from_status, to_status, event)
    SELECT ROW_NUMBER() OVER (ORDER BY entity, from_status, to_status, event), entity, from_status, to_status, event
    FROM (SELECT DISTINCT entity, from_status, to_status, event FROM history) m;
CREATE TABLE transitions (
    seq        {{serial}},
    at         BIGINT   NOT NULL,
    entity_key INTEGER  NOT NULL,
    move       SMALLINT NOT NULL,
    entity_no  TEXT     NOT NULL,
    actor      TEXT     NOT NULL,
    reason     TEXT     NOT NULL DEFAULT ''
);
