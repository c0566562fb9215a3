-- The charts' counts, one row an hour and kind: its buckets' counts together, as a JSON
-- object of bucket to count (sqlstore/charts.go). With a row per bucket (0036), a day's
-- chart read every bucket of every hour of both kinds, a few hundred rows, where an
-- empty window read none; now it reads two rows an hour. The store's fold merges the
-- deltas into an hour's object with a conditional update. The rows of chart_counts are
-- carried over, and the table dropped, by the steps of this migration (chartHoursSteps).
CREATE TABLE chart_hours (
    hour   BIGINT NOT NULL,
    kind   TEXT   NOT NULL,
    counts TEXT   NOT NULL,
    PRIMARY KEY (hour, kind)
);
