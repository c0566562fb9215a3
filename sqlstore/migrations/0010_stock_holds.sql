-- Stock policies "payment" and "reserve" (docs/design.md §6). A "reserve" SKU keeps an
-- unpaid order's units locked for reserve_minutes; each line's hold is one row here, HELD
-- until the payment sells it (SOLD) or the hold sweeper or a cancel gives the units back
-- (RELEASED). Both end it with a conditional update in the transaction that moves the
-- units, so a payment and the sweeper can never both move them.
ALTER TABLE skus ADD COLUMN reserve_minutes BIGINT NOT NULL DEFAULT 0;

CREATE TABLE stock_holds (
    order_no   TEXT    NOT NULL REFERENCES orders (order_no),
    line       INTEGER NOT NULL,
    sku        TEXT    NOT NULL REFERENCES skus (sku),
    qty        BIGINT  NOT NULL CHECK (qty > 0),
    hold_until BIGINT  NOT NULL,
    state      TEXT    NOT NULL CHECK (state IN ('HELD', 'SOLD', 'RELEASED')),
    created_at BIGINT  NOT NULL,
    updated_at BIGINT  NOT NULL,
    PRIMARY KEY (order_no, line)
);
-- The hold sweeper's query: standing holds by when they end. Ended holds leave the index.
CREATE INDEX stock_holds_due ON stock_holds (hold_until) WHERE state = 'HELD';
