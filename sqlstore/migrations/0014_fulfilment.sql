-- Fulfilment and after-sales ("拆单", "确认收货", "售后").

-- Where a SKU ships from, and one unit's weight and size, for splitting orders into parcels.
ALTER TABLE skus ADD COLUMN warehouse TEXT NOT NULL DEFAULT 'default';
ALTER TABLE skus ADD COLUMN weight_g BIGINT NOT NULL DEFAULT 0;
ALTER TABLE skus ADD COLUMN volume_cm3 BIGINT NOT NULL DEFAULT 0;

-- The delivery address, changeable until the first parcel ships.
ALTER TABLE orders ADD COLUMN address_name TEXT NOT NULL DEFAULT '';
ALTER TABLE orders ADD COLUMN address_phone TEXT NOT NULL DEFAULT '';
ALTER TABLE orders ADD COLUMN address_detail TEXT NOT NULL DEFAULT '';

-- Parcels, written in the transaction that marks the order paid.
CREATE TABLE shipments (
    shipment_no    TEXT PRIMARY KEY,
    order_no       TEXT    NOT NULL REFERENCES orders (order_no),
    seq            INTEGER NOT NULL,
    merchant_id    TEXT    NOT NULL,
    warehouse      TEXT    NOT NULL,
    status         TEXT    NOT NULL,
    weight_g       BIGINT  NOT NULL,
    volume_cm3     BIGINT  NOT NULL,
    carrier        TEXT    NOT NULL DEFAULT '',
    tracking_no    TEXT    NOT NULL DEFAULT '',
    receive_by     BIGINT  NOT NULL DEFAULT 0,
    buyer_extended INTEGER NOT NULL DEFAULT 0,
    extensions     INTEGER NOT NULL DEFAULT 0,
    shipped_at     BIGINT  NOT NULL DEFAULT 0,
    received_at    BIGINT  NOT NULL DEFAULT 0,
    received_by    TEXT    NOT NULL DEFAULT '',
    created_at     BIGINT  NOT NULL,
    updated_at     BIGINT  NOT NULL,
    UNIQUE (order_no, seq)
);
-- The auto-confirm sweeper's index: shipped parcels by receipt deadline.
CREATE INDEX shipments_receive_due ON shipments (receive_by) WHERE status = 'SHIPPED';

CREATE TABLE shipment_items (
    shipment_no TEXT    NOT NULL REFERENCES shipments (shipment_no),
    line        INTEGER NOT NULL,
    sku         TEXT    NOT NULL,
    qty         BIGINT  NOT NULL CHECK (qty > 0),
    refunded    BIGINT  NOT NULL DEFAULT 0 CHECK (refunded >= 0 AND refunded <= qty),
    PRIMARY KEY (shipment_no, line)
);

-- After-sales requests: refunds before shipping and returns; each one's number is also its
-- channel refund's out_refund_no, so it can never be refunded twice.
CREATE TABLE after_sales (
    after_sale_no      TEXT PRIMARY KEY,
    order_no           TEXT    NOT NULL REFERENCES orders (order_no),
    seq                INTEGER NOT NULL,
    payment_no         TEXT    NOT NULL,
    buyer_id           TEXT    NOT NULL,
    kind               TEXT    NOT NULL,
    status             TEXT    NOT NULL,
    reason             TEXT    NOT NULL DEFAULT '',
    amount             BIGINT  NOT NULL CHECK (amount >= 0),
    auto_review        INTEGER NOT NULL DEFAULT 0,
    return_carrier     TEXT    NOT NULL DEFAULT '',
    return_tracking_no TEXT    NOT NULL DEFAULT '',
    created_at         BIGINT  NOT NULL,
    updated_at         BIGINT  NOT NULL,
    refunded_at        BIGINT  NOT NULL DEFAULT 0,
    UNIQUE (order_no, seq)
);
CREATE INDEX after_sales_open ON after_sales (status, created_at) WHERE status NOT IN ('SUCCESS', 'REJECTED');

CREATE TABLE after_sale_items (
    after_sale_no TEXT    NOT NULL REFERENCES after_sales (after_sale_no),
    line          INTEGER NOT NULL,
    sku           TEXT    NOT NULL,
    qty           BIGINT  NOT NULL CHECK (qty > 0),
    amount        BIGINT  NOT NULL CHECK (amount >= 0),
    PRIMARY KEY (after_sale_no, line)
);
