-- Reconciliation checks the money, not just the trades (docs/reconciliation.md).
--
-- An attempt records the service fee it expects to be charged when it succeeds (fee, at
-- fee_rate, fee_recorded = 1), and channel_refunded, the amount the channel itself refunded
-- of it, that a refund's share of the fee is reckoned from. A refund the channel made records
-- the share of the fee it expects back (fee_back, fee_back_recorded = 1). Rows written before
-- have no fee recorded: reconciliation reckons theirs from the contract.
ALTER TABLE channel_orders ADD COLUMN fee_recorded INTEGER NOT NULL DEFAULT 0;
ALTER TABLE channel_orders ADD COLUMN fee BIGINT NOT NULL DEFAULT 0;
ALTER TABLE channel_orders ADD COLUMN fee_rate BIGINT NOT NULL DEFAULT 0;
ALTER TABLE channel_orders ADD COLUMN channel_refunded BIGINT NOT NULL DEFAULT 0;
ALTER TABLE refunds ADD COLUMN fee_back_recorded INTEGER NOT NULL DEFAULT 0;
ALTER TABLE refunds ADD COLUMN fee_back BIGINT NOT NULL DEFAULT 0;

-- A report has three layers: the merchant account its bills are of, each layer's summary
-- (JSON: {"TRADES": {...}, "FEES": {...}, "SETTLEMENT": {...}}) and the day's figures the
-- fees and settlement layers compared (JSON). balance_known and closing_balance repeat the
-- figures' closing balance, so that the next day's report finds it by index. Reports made
-- before have no account, no layers ('{}') and no figures ('{}').
ALTER TABLE reconciliations ADD COLUMN account TEXT NOT NULL DEFAULT '';
ALTER TABLE reconciliations ADD COLUMN layers TEXT NOT NULL DEFAULT '{}';
ALTER TABLE reconciliations ADD COLUMN figures TEXT NOT NULL DEFAULT '{}';
ALTER TABLE reconciliations ADD COLUMN balance_known INTEGER NOT NULL DEFAULT 0;
ALTER TABLE reconciliations ADD COLUMN closing_balance BIGINT NOT NULL DEFAULT 0;
ALTER TABLE reconciliation_items ADD COLUMN layer TEXT NOT NULL DEFAULT '';
ALTER TABLE reconciliation_items ADD COLUMN difference BIGINT NOT NULL DEFAULT 0;

-- The latest earlier day of a channel whose closing balance is known.
CREATE INDEX reconciliations_closing ON reconciliations (channel, bill_date) WHERE balance_known = 1;
