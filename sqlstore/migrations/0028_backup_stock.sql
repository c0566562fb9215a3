-- Backup stock (备用库存, docs/design.md §6.2): units a "payment" or "reserve" SKU keeps
-- aside for payments that arrive after its sellable units ran out. They are not in the
-- stock rows (whose CHECK available + locked + sold = total SQLite cannot change without
-- rebuilding the table), so they have a row of their own: units kept aside, used, and
-- remaining, used + remaining = units always. A unit the backup serves moves, in the
-- payment's transaction, from remaining to used here and onto the SKU's bucket 0 as sold
-- and total both (so that row still adds up). A SKU without backup has no row.
CREATE TABLE stock_backup (
    sku       TEXT   PRIMARY KEY REFERENCES skus (sku),
    units     BIGINT NOT NULL CHECK (units > 0),
    used      BIGINT NOT NULL CHECK (used >= 0),
    remaining BIGINT NOT NULL CHECK (remaining >= 0),
    CHECK (used + remaining = units)
);

-- Which order line each backup unit went to: one row per line the backup served, written
-- with the units it moved, so that the backup's used units can be traced to paid orders.
CREATE TABLE stock_backup_sales (
    order_no TEXT    NOT NULL REFERENCES orders (order_no),
    line     INTEGER NOT NULL,
    sku      TEXT    NOT NULL REFERENCES stock_backup (sku),
    qty      BIGINT  NOT NULL CHECK (qty > 0),
    sold_at  BIGINT  NOT NULL,
    PRIMARY KEY (order_no, line)
);
