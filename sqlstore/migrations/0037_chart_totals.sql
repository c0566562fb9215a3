-- The charts' counts as running totals: a row for each kind and each hour that counted
-- something, holding every bucket's count from the first hour to the end of that one, as
-- a JSON object of bucket to count (sqlstore/charts.go). A window's counts are the latest
-- row less the latest row before the window: two rows, whatever the window's length or how
-- full it is. With a row per hour and bucket (0036), a day's chart read every bucket of
-- every hour, a few hundred rows, where an empty window read none. The store's fold adds
-- the deltas to the row of their hour (made from the row before it if it is not there) and
-- to any row after it. Retention keeps the last row before the longest window: the
-- window's baseline. Every read and write is of one kind, by its hours: the key is the
-- kind's first. The rows of chart_counts are carried over, and the table dropped, by
-- the steps of this migration (chartTotalsSteps).
CREATE TABLE chart_totals (
    kind   TEXT   NOT NULL,
    hour   BIGINT NOT NULL,
    counts TEXT   NOT NULL,
    PRIMARY KEY (kind, hour)
);
