-- Reconciliation against the channels' T+1 bills: one row per run of one channel's
-- bill of one day, with its items (matched rows and differences, each classed and marked
-- explained or not). Reports are only ever added; a day reconciled again gets a new report.
CREATE TABLE reconciliations (
    id          {{identity}},
    channel     TEXT    NOT NULL,
    bill_date   TEXT    NOT NULL,
    started_at  BIGINT  NOT NULL,
    finished_at BIGINT  NOT NULL,
    bill_rows   INTEGER NOT NULL,
    unexplained INTEGER NOT NULL,
    counts      TEXT    NOT NULL -- JSON: {"MATCHED": n, …}
);
CREATE INDEX reconciliations_by_day ON reconciliations (channel, bill_date);

CREATE TABLE reconciliation_items (
    reconciliation_id BIGINT  NOT NULL REFERENCES reconciliations (id),
    seq               INTEGER NOT NULL,
    class             TEXT    NOT NULL,
    resolution        TEXT    NOT NULL,
    kind              TEXT    NOT NULL,
    out_trade_no      TEXT    NOT NULL,
    out_refund_no     TEXT    NOT NULL,
    bill_amount       BIGINT  NOT NULL,
    local_amount      BIGINT  NOT NULL,
    in_bill           INTEGER NOT NULL,
    detail            TEXT    NOT NULL,
    PRIMARY KEY (reconciliation_id, seq)
);

-- A day's paid attempts and settled refunds of one channel, looked for in its bill.
CREATE INDEX channel_orders_paid_by_day ON channel_orders (channel, paid_at) WHERE status = 'SUCCESS';
CREATE INDEX refunds_settled_by_day ON refunds (channel, refunded_at) WHERE status = 'SUCCESS';
