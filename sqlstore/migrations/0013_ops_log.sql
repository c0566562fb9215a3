-- What the operations console shows and nothing else depends on: every channel notification
-- as it arrived, verified or not (the notifications table keeps only verified ones, once
-- each), and every query of a channel about an attempt. Written outside the state-changing
-- transactions, best effort.
CREATE TABLE notification_log (
    id           {{identity}},
    received_at  BIGINT  NOT NULL,
    channel      TEXT    NOT NULL,
    out_trade_no TEXT    NOT NULL DEFAULT '',
    verified     INTEGER NOT NULL,
    result       TEXT    NOT NULL,
    detail       TEXT    NOT NULL DEFAULT '',
    raw          TEXT    NOT NULL
);
CREATE INDEX notification_log_by_trade ON notification_log (out_trade_no, id);
CREATE INDEX notification_log_by_time ON notification_log (received_at);

CREATE TABLE query_log (
    id           {{identity}},
    at           BIGINT NOT NULL,
    channel      TEXT   NOT NULL,
    out_trade_no TEXT   NOT NULL,
    trigger_name TEXT   NOT NULL,
    outcome      TEXT   NOT NULL,
    detail       TEXT   NOT NULL DEFAULT ''
);
CREATE INDEX query_log_by_trade ON query_log (out_trade_no, id);

-- The console's order search and the buyer's order list.
CREATE INDEX orders_by_created ON orders (created_at);
