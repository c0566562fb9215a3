-- orderpay schema. Times are BIGINT milliseconds since the Unix epoch (0 = not yet);
-- money is BIGINT fen. {{identity}} is the engine's auto-increment primary key.

CREATE TABLE skus (
    sku          TEXT PRIMARY KEY,
    merchant_id  TEXT   NOT NULL,
    title        TEXT   NOT NULL,
    price        BIGINT NOT NULL CHECK (price > 0),
    product_type TEXT   NOT NULL,
    stock_policy TEXT   NOT NULL,
    created_at   BIGINT NOT NULL
);

-- One row per bucket; a hot SKU can later be split over several buckets so that buyers do
-- not all wait on one row. The CHECKs make oversell and lost units impossible at the engine.
CREATE TABLE stock (
    sku       TEXT    NOT NULL REFERENCES skus (sku),
    bucket    INTEGER NOT NULL DEFAULT 0,
    available BIGINT  NOT NULL CHECK (available >= 0),
    locked    BIGINT  NOT NULL CHECK (locked >= 0),
    sold      BIGINT  NOT NULL CHECK (sold >= 0),
    total     BIGINT  NOT NULL,
    CHECK (available + locked + sold = total),
    PRIMARY KEY (sku, bucket)
);

CREATE TABLE orders (
    order_no     TEXT PRIMARY KEY,
    buyer_id     TEXT   NOT NULL,
    status       TEXT   NOT NULL,
    total        BIGINT NOT NULL CHECK (total >= 0),
    discount     BIGINT NOT NULL CHECK (discount >= 0),
    payable      BIGINT NOT NULL CHECK (payable > 0),
    product_type TEXT   NOT NULL,
    pay_deadline BIGINT NOT NULL,
    payment_no   TEXT   NOT NULL DEFAULT '',
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL,
    paid_at      BIGINT NOT NULL DEFAULT 0,
    closed_at    BIGINT NOT NULL DEFAULT 0,
    CHECK (payable = total - discount)
);
CREATE INDEX orders_pending_by_deadline ON orders (pay_deadline) WHERE status = 'PENDING_PAYMENT';
CREATE INDEX orders_by_buyer ON orders (buyer_id, created_at);

CREATE TABLE order_items (
    order_no    TEXT    NOT NULL REFERENCES orders (order_no),
    line        INTEGER NOT NULL,
    sku         TEXT    NOT NULL REFERENCES skus (sku),
    merchant_id TEXT    NOT NULL,
    title       TEXT    NOT NULL,
    unit_price  BIGINT  NOT NULL CHECK (unit_price > 0),
    qty         BIGINT  NOT NULL CHECK (qty > 0),
    amount      BIGINT  NOT NULL,
    discount    BIGINT  NOT NULL CHECK (discount >= 0),
    payable     BIGINT  NOT NULL,
    CHECK (amount = unit_price * qty),
    CHECK (payable = amount - discount),
    PRIMARY KEY (order_no, line)
);

-- Payment center tables. One payment per order; one payment : N channel orders.
CREATE TABLE payments (
    payment_no        TEXT PRIMARY KEY,
    order_no          TEXT   NOT NULL UNIQUE,
    amount            BIGINT NOT NULL CHECK (amount > 0),
    refunded          BIGINT NOT NULL DEFAULT 0 CHECK (refunded >= 0 AND refunded <= amount),
    status            TEXT   NOT NULL,
    subject           TEXT   NOT NULL,
    pay_deadline      BIGINT NOT NULL,
    paid_channel      TEXT   NOT NULL DEFAULT '',
    paid_out_trade_no TEXT   NOT NULL DEFAULT '',
    created_at        BIGINT NOT NULL,
    updated_at        BIGINT NOT NULL,
    paid_at           BIGINT NOT NULL DEFAULT 0
);

CREATE TABLE channel_orders (
    out_trade_no  TEXT PRIMARY KEY,
    payment_no    TEXT    NOT NULL REFERENCES payments (payment_no),
    channel       TEXT    NOT NULL,
    seq           INTEGER NOT NULL,
    amount        BIGINT  NOT NULL CHECK (amount > 0),
    status        TEXT    NOT NULL,
    unknown       INTEGER NOT NULL DEFAULT 0,
    qr_code       TEXT    NOT NULL DEFAULT '',
    qr_expires_at BIGINT  NOT NULL DEFAULT 0,
    trade_no      TEXT    NOT NULL DEFAULT '',
    created_at    BIGINT  NOT NULL,
    updated_at    BIGINT  NOT NULL,
    paid_at       BIGINT  NOT NULL DEFAULT 0,
    UNIQUE (payment_no, seq)
);
-- At most one open attempt per payment and channel: a repeated or concurrent pay request
-- finds this one instead of creating a second payable QR code.
CREATE UNIQUE INDEX channel_orders_one_open ON channel_orders (payment_no, channel)
    WHERE status IN ('CREATED', 'PAYING');

-- Verified channel notifications, once per (channel, notify_id): a redelivery is not stored again.
CREATE TABLE notifications (
    channel      TEXT   NOT NULL,
    notify_id    TEXT   NOT NULL,
    out_trade_no TEXT   NOT NULL,
    outcome      TEXT   NOT NULL,
    amount       BIGINT NOT NULL,
    raw          TEXT   NOT NULL,
    received_at  BIGINT NOT NULL,
    PRIMARY KEY (channel, notify_id)
);
CREATE INDEX notifications_by_trade ON notifications (out_trade_no);

-- Append-only history of every transition of every entity.
CREATE TABLE history (
    seq         {{identity}},
    entity      TEXT   NOT NULL,
    entity_no   TEXT   NOT NULL,
    from_status TEXT   NOT NULL,
    to_status   TEXT   NOT NULL,
    event       TEXT   NOT NULL,
    actor       TEXT   NOT NULL,
    reason      TEXT   NOT NULL DEFAULT '',
    raw         TEXT   NOT NULL DEFAULT '',
    at          BIGINT NOT NULL
);
CREATE INDEX history_by_entity ON history (entity, entity_no, seq);

-- Transactional outbox: written with the state change, published by the relay.
CREATE TABLE outbox (
    seq          {{identity}},
    msg_id       TEXT   NOT NULL UNIQUE,
    subject      TEXT   NOT NULL,
    payload      TEXT   NOT NULL,
    created_at   BIGINT NOT NULL,
    published_at BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX outbox_unpublished ON outbox (seq) WHERE published_at = 0;
