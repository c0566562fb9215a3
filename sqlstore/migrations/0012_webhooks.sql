-- Signed webhooks to business systems (package webhook). One delivery per
-- (payment-center message, subscriber): the consumer of payment.* and refund.* inserts it
-- idempotently, so a redelivered or re-published message adds nothing. A worker POSTs the
-- due rows on the schedule 15s, 15s, 30s, 3m, … 6h until a 2xx; after the last retry the
-- row is FAILED (dead). An operator's resend is one more attempt, whatever the status.
CREATE TABLE webhook_deliveries (
    id           {{identity}},
    msg_id       TEXT    NOT NULL,
    subscriber   TEXT    NOT NULL,
    subject      TEXT    NOT NULL,
    payload      TEXT    NOT NULL,
    order_no     TEXT    NOT NULL DEFAULT '',
    payment_no   TEXT    NOT NULL DEFAULT '',
    status       TEXT    NOT NULL CHECK (status IN ('PENDING', 'SUCCEEDED', 'FAILED')),
    attempts     INTEGER NOT NULL DEFAULT 0,
    next_at      BIGINT  NOT NULL,
    last_status  INTEGER NOT NULL DEFAULT 0,
    last_error   TEXT    NOT NULL DEFAULT '',
    created_at   BIGINT  NOT NULL,
    updated_at   BIGINT  NOT NULL,
    delivered_at BIGINT  NOT NULL DEFAULT 0,
    UNIQUE (msg_id, subscriber)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_at) WHERE status = 'PENDING';
CREATE INDEX webhook_deliveries_by_payment ON webhook_deliveries (payment_no);

-- Every POST of a delivery, scheduled or resent by hand: what the subscriber answered.
CREATE TABLE webhook_attempts (
    seq         {{identity}},
    delivery_id BIGINT  NOT NULL REFERENCES webhook_deliveries (id),
    kind        TEXT    NOT NULL,
    http_status INTEGER NOT NULL DEFAULT 0,
    error       TEXT    NOT NULL DEFAULT '',
    at          BIGINT  NOT NULL
);
CREATE INDEX webhook_attempts_by_delivery ON webhook_attempts (delivery_id, seq);
