-- Orders, payments and webhook deliveries by status, for the gauges at /metrics, kept as
-- things happen so that a scrape reads a few rows whatever the history. Triggers on the
-- three tables (made with this migration, one kind per engine: statusCountTriggers) add a
-- row of +1 or -1 to status_count_deltas in the transaction of each insert, status change
-- or delete: an insert, never an update of a shared row, so that concurrent writers do not
-- queue on a counter. Every second or so the store folds the deltas into status_counts
-- (Store.FoldStatusCounts); a read adds what is not folded yet. The migration counts the
-- rows already there once, after the triggers exist.
CREATE TABLE status_counts (
    kind   TEXT   NOT NULL,
    status TEXT   NOT NULL,
    n      BIGINT NOT NULL,
    PRIMARY KEY (kind, status)
);

CREATE TABLE status_count_deltas (
    id     {{identity}},
    kind   TEXT    NOT NULL,
    status TEXT    NOT NULL,
    delta  INTEGER NOT NULL
);
