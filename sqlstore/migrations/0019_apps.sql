-- Business apps served by the payment center (package apppay, docs/payments-api.md): each
-- with its API keys (only their SHA-256 is kept), its webhooks, its payments under its own
-- order numbers, and its refunds under its own refund numbers.
CREATE TABLE apps (
    app_id         TEXT   PRIMARY KEY,
    name           TEXT   NOT NULL,
    webhook_urls   TEXT   NOT NULL,
    webhook_secret TEXT   NOT NULL,
    channels       TEXT   NOT NULL,
    created_at     BIGINT NOT NULL,
    updated_at     BIGINT NOT NULL
);

-- A key is valid until expires_at (0: no end until a rotation sets one) and unless revoked.
CREATE TABLE app_keys (
    key_id     TEXT   PRIMARY KEY,
    app_id     TEXT   NOT NULL REFERENCES apps (app_id),
    hash       TEXT   NOT NULL UNIQUE,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL DEFAULT 0,
    revoked_at BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX app_keys_by_app ON app_keys (app_id, created_at);

-- refund_reserved only grows, by a conditional update that keeps it within amount.
CREATE TABLE app_payments (
    payment_no        TEXT   PRIMARY KEY,
    order_key         TEXT   NOT NULL UNIQUE,
    app_id            TEXT   NOT NULL REFERENCES apps (app_id),
    merchant_order_no TEXT   NOT NULL,
    amount            BIGINT NOT NULL CHECK (amount > 0),
    subject           TEXT   NOT NULL,
    channel           TEXT   NOT NULL,
    expires_at        BIGINT NOT NULL,
    status            TEXT   NOT NULL CHECK (status IN ('OPEN', 'SUCCESS', 'CLOSED')),
    request_hash      TEXT   NOT NULL,
    idempotency_key   TEXT   NOT NULL DEFAULT '',
    refund_reserved   BIGINT NOT NULL DEFAULT 0 CHECK (refund_reserved >= 0 AND refund_reserved <= amount),
    close_reason      TEXT   NOT NULL DEFAULT '',
    created_at        BIGINT NOT NULL,
    updated_at        BIGINT NOT NULL,
    UNIQUE (app_id, merchant_order_no)
);
CREATE UNIQUE INDEX app_payments_idempotency ON app_payments (app_id, idempotency_key) WHERE idempotency_key <> '';
CREATE INDEX app_payments_by_app ON app_payments (app_id, payment_no);
CREATE INDEX app_payments_due ON app_payments (expires_at) WHERE status = 'OPEN';

CREATE TABLE app_refunds (
    out_refund_no TEXT   PRIMARY KEY,
    app_id        TEXT   NOT NULL REFERENCES apps (app_id),
    refund_no     TEXT   NOT NULL,
    payment_no    TEXT   NOT NULL REFERENCES app_payments (payment_no),
    amount        BIGINT NOT NULL CHECK (amount > 0),
    reason        TEXT   NOT NULL,
    request_hash  TEXT   NOT NULL,
    created_at    BIGINT NOT NULL,
    UNIQUE (app_id, refund_no)
);
CREATE INDEX app_refunds_by_app ON app_refunds (app_id, out_refund_no);
CREATE INDEX app_refunds_by_payment ON app_refunds (payment_no);
