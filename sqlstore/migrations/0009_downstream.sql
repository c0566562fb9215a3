-- The example downstream consumers (package downstream): their own tables, which
-- nothing else writes. Each is idempotent by its key, so a redelivered or re-published
-- event changes nothing.

-- Points, one row per effect: the award for an order (ref '') and one revoke per refund
-- (ref = out_refund_no). A buyer's balance is the sum of points, awards minus revokes.
CREATE TABLE points_ledger (
    order_no   TEXT   NOT NULL,
    kind       TEXT   NOT NULL CHECK (kind IN ('award', 'revoke')),
    ref        TEXT   NOT NULL,
    points     BIGINT NOT NULL CHECK (points >= 0),
    buyer_id   TEXT   NOT NULL,
    msg_id     TEXT   NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (order_no, kind, ref)
);
CREATE INDEX points_ledger_buyer ON points_ledger (buyer_id, created_at);

-- The SMS log: one row per (message, template). Nothing is sent.
CREATE TABLE sms_log (
    msg_id     TEXT   NOT NULL,
    template   TEXT   NOT NULL,
    buyer_id   TEXT   NOT NULL,
    order_no   TEXT   NOT NULL,
    text       TEXT   NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (msg_id, template)
);
CREATE INDEX sms_log_order ON sms_log (order_no, created_at);
