-- The safety net of active queries ("掉单表"): one row per PAYING attempt, due at
-- next_at. Delayed messages drive the queries; a sweeper over this small table catches any
-- the broker lost. The row goes away when the attempt leaves PAYING; when attempts run out
-- it is flagged for reconciliation instead.
CREATE TABLE pending_queries (
    out_trade_no TEXT PRIMARY KEY REFERENCES channel_orders (out_trade_no),
    payment_no   TEXT    NOT NULL,
    channel      TEXT    NOT NULL,
    attempts     INTEGER NOT NULL DEFAULT 0,
    next_at      BIGINT  NOT NULL,
    flagged      INTEGER NOT NULL DEFAULT 0,
    last_outcome TEXT    NOT NULL DEFAULT '',
    created_at   BIGINT  NOT NULL,
    updated_at   BIGINT  NOT NULL
);
CREATE INDEX pending_queries_due ON pending_queries (next_at) WHERE flagged = 0;

-- The PAYING lock: while one request is asking the channel for a code, another
-- for the same order waits for it instead of asking again.
ALTER TABLE payments ADD COLUMN prepay_lock_until BIGINT NOT NULL DEFAULT 0;
