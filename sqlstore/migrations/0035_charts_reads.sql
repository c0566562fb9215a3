-- The charts' notification outcomes from an index alone, one that holds what they count
-- (verified, result) after the time, so that a day's outcomes are not read from rows that
-- retention's deletes leave spread over the table (at a million past orders, 2,509 pages
-- read for a day's 2,955 notifications). Retention keeps walking notification_log_by_time.
-- On PostgreSQL an index-only read needs the table's pages marked all-visible by a vacuum:
-- migrationExtras (ops.go) has autovacuum come to the charts' two tables after a fixed
-- number of rows, not after a fifth of a table that grows with the history.
CREATE INDEX notification_log_outcomes ON notification_log (received_at, verified, result);
