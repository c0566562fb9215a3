-- A refund is sent or queried by one worker at a time, on any instance: the worker claims
-- it first (sends one up, claimed_until when the claim lapses), and records the channel's
-- answer only while the claim is still its own. sends > 0 says the channel was asked to
-- make the refund; a refund before this version counts its recorded answers.
ALTER TABLE refunds ADD COLUMN sends INTEGER NOT NULL DEFAULT 0;
ALTER TABLE refunds ADD COLUMN claimed_until BIGINT NOT NULL DEFAULT 0;
UPDATE refunds SET sends = attempts;
