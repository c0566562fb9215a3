-- Webhook subscribers: when each was first configured. A subscriber receives the events
-- written from then on; an operator's replay sends it older ones from the outbox.
CREATE TABLE webhook_subscribers (
    name  TEXT PRIMARY KEY,
    since BIGINT NOT NULL
);

-- The replay reads the outbox's payment-center results in order of writing.
CREATE INDEX outbox_by_subject_time ON outbox (subject, created_at);
