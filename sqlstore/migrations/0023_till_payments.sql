-- Barcode payments at the counter (docs/barcode.md): one row per payment a till asked for,
-- written in the transaction that creates its attempt, before the channel hears of it. An
-- app's Idempotency-Key names one payment, so a till that retries never pays twice. The
-- buyer's code is not kept: only its last four digits, for the till's list. While a reverse
-- may have taken effect, a query's "paid" is not believed (docs/barcode.md).
CREATE TABLE till_payments (
    out_trade_no    TEXT   PRIMARY KEY,
    payment_no      TEXT   NOT NULL,
    app_id          TEXT   NOT NULL REFERENCES apps (app_id),
    idempotency_key TEXT   NOT NULL,
    request_hash    TEXT   NOT NULL,
    channel         TEXT   NOT NULL,
    amount          BIGINT NOT NULL CHECK (amount > 0),
    order_no        TEXT   NOT NULL DEFAULT '',
    app_payment_no  TEXT   NOT NULL DEFAULT '',
    store_id        TEXT   NOT NULL DEFAULT '',
    till_id         TEXT   NOT NULL DEFAULT '',
    description     TEXT   NOT NULL DEFAULT '',
    code_tail       TEXT   NOT NULL DEFAULT '',
    answer          TEXT   NOT NULL DEFAULT '' CHECK (answer IN ('', 'PAID', 'REFUSED', 'CANCELLED')),
    refusal         TEXT   NOT NULL DEFAULT '',
    detail          TEXT   NOT NULL DEFAULT '',
    created_at      BIGINT NOT NULL,
    answered_at     BIGINT NOT NULL DEFAULT 0,
    -- When a reverse (Alipay's cancel, WeChat's reverse) was last on its way with no
    -- definite refusal yet: it may have taken effect, and refunded a payment. 0: none.
    reverse_sent_at BIGINT NOT NULL DEFAULT 0,
    UNIQUE (app_id, idempotency_key)
);
CREATE INDEX till_payments_by_till ON till_payments (app_id, till_id, created_at);
CREATE INDEX till_payments_by_app ON till_payments (app_id, created_at);
