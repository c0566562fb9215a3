-- Idempotent order creation ("重复下单"): a client's Idempotency-Key (24 h) or, without
-- one, the request itself (10 s), mapped to the order it created. Written in the
-- transaction that creates the order, so that two identical requests never both create one.
CREATE TABLE request_keys (
    buyer_id     TEXT   NOT NULL,
    request_key  TEXT   NOT NULL,
    request_hash TEXT   NOT NULL,
    order_no     TEXT   NOT NULL,
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL,
    PRIMARY KEY (buyer_id, request_key)
);
CREATE INDEX request_keys_expiry ON request_keys (expires_at);
