-- Anti-abuse: a per-buyer purchase limit on a SKU, counted in units held by the
-- buyer's orders that are not cancelled; and a blocklist of buyers and devices.
ALTER TABLE skus ADD COLUMN limit_per_buyer BIGINT NOT NULL DEFAULT 0;

CREATE TABLE buyer_purchases (
    buyer_id TEXT   NOT NULL,
    sku      TEXT   NOT NULL REFERENCES skus (sku),
    qty      BIGINT NOT NULL CHECK (qty >= 0),
    PRIMARY KEY (buyer_id, sku)
);

CREATE TABLE blocklist (
    kind       TEXT   NOT NULL CHECK (kind IN ('buyer', 'device')),
    value      TEXT   NOT NULL,
    reason     TEXT   NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL,
    PRIMARY KEY (kind, value)
);
