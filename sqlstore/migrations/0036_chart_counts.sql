-- The console's charts from counts kept hour by hour, not from the rows they count: a day
-- of a busy shop's notifications and paid payments is thousands of rows, read on every
-- view of the charts, and a window of ninety days is a quarter of the log. Triggers
-- (made with this migration, one kind per engine: chartCountsSteps) add a row of +1 to
-- chart_count_deltas in the transaction that logs a notification or makes a payment paid:
-- its hour, its kind, and its bucket (the notification's verified and result, the
-- payment's latency bound). The store folds the deltas into chart_counts with the status
-- counts' (Store.FoldStatusCounts); a read adds what is not folded yet. Retention removes
-- the hours past the longest window (orderpay.ChartWindowMax). The migration counts the
-- rows already there once, after the triggers exist. The two indexes the charts read
-- before are no longer read by anything.
CREATE TABLE chart_counts (
    hour   BIGINT NOT NULL,
    kind   TEXT   NOT NULL,
    bucket TEXT   NOT NULL,
    n      BIGINT NOT NULL,
    PRIMARY KEY (hour, kind, bucket)
);

CREATE TABLE chart_count_deltas (
    id     {{identity}},
    hour   BIGINT  NOT NULL,
    kind   TEXT    NOT NULL,
    bucket TEXT    NOT NULL,
    delta  INTEGER NOT NULL
);

DROP INDEX notification_log_outcomes;
DROP INDEX payments_paid_by_time;
