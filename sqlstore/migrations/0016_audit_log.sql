-- The operators' audit log: every write an operator made through the admin API (the console
-- included), with who, what, about which order, and what it came to.
CREATE TABLE operator_actions (
    id       {{identity}},
    at       BIGINT  NOT NULL,
    actor    TEXT    NOT NULL,
    role     TEXT    NOT NULL,
    action   TEXT    NOT NULL,
    target   TEXT    NOT NULL DEFAULT '',
    order_no TEXT    NOT NULL DEFAULT '',
    status   INTEGER NOT NULL,
    code     TEXT    NOT NULL DEFAULT '',
    detail   TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX operator_actions_by_time ON operator_actions (at);
CREATE INDEX operator_actions_by_actor ON operator_actions (actor, at);
CREATE INDEX operator_actions_by_order ON operator_actions (order_no, at);
