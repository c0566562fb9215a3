-- The channel's raw message behind a transition lives beside the transition, not in it:
-- retention then deletes whole rows, oldest first, and the pages they held are free again,
-- where clearing a column in place left every history page half empty. The transitions
-- themselves are kept.
DROP INDEX history_raw_by_time;
CREATE TABLE history_raw (
    seq {{key64}},
    raw TEXT   NOT NULL,
    at  BIGINT NOT NULL
);
CREATE INDEX history_raw_by_time ON history_raw (at);
INSERT INTO history_raw (seq, raw, at) SELECT seq, raw, at FROM history WHERE raw <> '';
ALTER TABLE history DROP COLUMN raw;
