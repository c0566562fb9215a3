-- Every refund ends with the money back. A refund the channel refuses for now (balance,
-- frequency) is sent again on a schedule: tries counts those refusals since retrying_since,
-- retried the times it was set to be sent again after one, over its whole life. One that cannot end by itself waits for an operator
-- (NEEDS_ACTION, problem says why, since needs_action_at), who retries it or records that
-- the money went back outside the channel (RESOLVED: resolved_by, resolved_ref, resolved_note).
ALTER TABLE refunds ADD COLUMN tries INTEGER NOT NULL DEFAULT 0;
ALTER TABLE refunds ADD COLUMN retrying_since BIGINT NOT NULL DEFAULT 0;
ALTER TABLE refunds ADD COLUMN retried INTEGER NOT NULL DEFAULT 0;
ALTER TABLE refunds ADD COLUMN problem TEXT NOT NULL DEFAULT '';
ALTER TABLE refunds ADD COLUMN needs_action_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE refunds ADD COLUMN resolved_by TEXT NOT NULL DEFAULT '';
ALTER TABLE refunds ADD COLUMN resolved_ref TEXT NOT NULL DEFAULT '';
ALTER TABLE refunds ADD COLUMN resolved_note TEXT NOT NULL DEFAULT '';

-- A refund the channel refused before this version was FAILED, and nothing ever acted on
-- it: its money is owed, so it goes into the operators' queue, and its after-sales request
-- is refunding again until the money is back.
UPDATE refunds SET status = 'NEEDS_ACTION', needs_action_at = updated_at,
    problem = 'refused by the channel before refunds were retried (was FAILED)'
    WHERE status = 'FAILED';
UPDATE after_sales SET status = 'REFUNDING' WHERE status = 'FAILED';

-- The operators' queue, oldest first.
CREATE INDEX refunds_needing_action ON refunds (needs_action_at) WHERE status = 'NEEDS_ACTION';
