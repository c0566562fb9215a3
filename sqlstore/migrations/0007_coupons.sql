-- Promotions: coupon templates ("amount_off fen off an order of at least
-- threshold fen", valid in [valid_from, valid_until), 0 = unbounded) and the coupons issued
-- from them to buyers. A coupon is AVAILABLE, or USED by exactly one order; a cancel makes
-- it AVAILABLE again. Orders record the coupon they used ('' for none).
CREATE TABLE coupon_templates (
    code        TEXT PRIMARY KEY,
    title       TEXT   NOT NULL,
    amount_off  BIGINT NOT NULL CHECK (amount_off > 0),
    threshold   BIGINT NOT NULL CHECK (threshold >= 0),
    valid_from  BIGINT NOT NULL DEFAULT 0,
    valid_until BIGINT NOT NULL DEFAULT 0,
    created_at  BIGINT NOT NULL,
    CHECK (valid_until = 0 OR valid_until > valid_from)
);

CREATE TABLE coupons (
    id         TEXT PRIMARY KEY,
    code       TEXT   NOT NULL REFERENCES coupon_templates (code),
    buyer_id   TEXT   NOT NULL,
    status     TEXT   NOT NULL CHECK (status IN ('AVAILABLE', 'USED')),
    order_no   TEXT   NOT NULL DEFAULT '',
    issued_at  BIGINT NOT NULL,
    used_at    BIGINT NOT NULL DEFAULT 0,
    updated_at BIGINT NOT NULL,
    CHECK ((status = 'USED' AND order_no <> '') OR (status = 'AVAILABLE' AND order_no = ''))
);
CREATE INDEX coupons_by_buyer ON coupons (buyer_id, issued_at);

ALTER TABLE orders ADD COLUMN coupon_id TEXT NOT NULL DEFAULT '';
