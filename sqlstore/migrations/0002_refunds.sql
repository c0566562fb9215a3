-- Channel refunds: the money the payment center sends back (duplicate or late payments,
-- payments for cancelled orders, and later after-sales). One row per out_refund_no, the
-- number the channel knows the refund by, so a resend can never refund twice.
CREATE TABLE refunds (
    out_refund_no TEXT PRIMARY KEY,
    out_trade_no  TEXT    NOT NULL REFERENCES channel_orders (out_trade_no),
    payment_no    TEXT    NOT NULL REFERENCES payments (payment_no),
    channel       TEXT    NOT NULL,
    amount        BIGINT  NOT NULL CHECK (amount > 0),
    reason        TEXT    NOT NULL,
    status        TEXT    NOT NULL,
    unknown       INTEGER NOT NULL DEFAULT 0,
    attempts      INTEGER NOT NULL DEFAULT 0,
    next_at       BIGINT  NOT NULL,
    created_at    BIGINT  NOT NULL,
    updated_at    BIGINT  NOT NULL,
    refunded_at   BIGINT  NOT NULL DEFAULT 0
);
CREATE INDEX refunds_due ON refunds (next_at) WHERE status IN ('PENDING', 'PROCESSING');
CREATE INDEX refunds_by_trade ON refunds (out_trade_no);

-- The timeout sweeper's small index: payments that can still be paid, by deadline.
CREATE INDEX payments_open_by_deadline ON payments (pay_deadline) WHERE status IN ('UNPAID', 'PAYING');

-- The scan compensation's index: attempts still waiting for a result, oldest first.
CREATE INDEX channel_orders_paying_by_age ON channel_orders (created_at) WHERE status = 'PAYING';
