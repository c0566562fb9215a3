-- Queued admission (docs/design.md §6.1): a queued SKU's buyers take tickets, which the
-- order system turns into orders in arrival order (seq) at the SKU's pace.
ALTER TABLE skus ADD COLUMN queued INTEGER NOT NULL DEFAULT 0;
ALTER TABLE skus ADD COLUMN queue_wait_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE skus ADD COLUMN queue_pace BIGINT NOT NULL DEFAULT 0;

CREATE TABLE tickets (
    seq          {{identity}},
    ticket_id    TEXT    NOT NULL UNIQUE,
    sku          TEXT    NOT NULL REFERENCES skus (sku),
    buyer_id     TEXT    NOT NULL,
    qty          BIGINT  NOT NULL CHECK (qty > 0),
    state        TEXT    NOT NULL,
    order_no     TEXT    NOT NULL DEFAULT '',
    reason       TEXT    NOT NULL DEFAULT '',
    request      TEXT    NOT NULL,
    request_key  TEXT    NOT NULL DEFAULT '',
    request_hash TEXT    NOT NULL,
    created_at   BIGINT  NOT NULL,
    expires_at   BIGINT  NOT NULL,
    updated_at   BIGINT  NOT NULL
);
-- The queue of each SKU, in arrival order: what the consumer serves next and what a
-- position counts.
CREATE INDEX tickets_waiting ON tickets (sku, seq) WHERE state = 'WAITING';
-- One live ticket per buyer and SKU.
CREATE UNIQUE INDEX tickets_live ON tickets (buyer_id, sku) WHERE state = 'WAITING';
-- A client's Idempotency-Key names one ticket.
CREATE UNIQUE INDEX tickets_key ON tickets (buyer_id, request_key) WHERE request_key <> '';
-- No ticket yields two orders.
CREATE UNIQUE INDEX tickets_order ON tickets (order_no) WHERE order_no <> '';
-- Ended tickets, oldest first, for retention.
CREATE INDEX tickets_ended ON tickets (updated_at) WHERE state <> 'WAITING';
