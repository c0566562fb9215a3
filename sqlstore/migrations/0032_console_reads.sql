-- The console's reads over the whole history, each made to walk only the rows it shows
-- (docs/design.md, "Reads bounded by what they return"):
--   the charts' latest paid payments (ORDER BY paid_at DESC LIMIT n), which read every
--   paid payment of the chart's window before;
CREATE INDEX payments_paid_by_time ON payments (paid_at) WHERE status = 'SUCCESS';
--   refunds by reason, newest first, one reason at a time;
CREATE INDEX refunds_by_reason ON refunds (reason, created_at);
--   the after-sales queue of any status (the partial index of open requests cannot serve
--   a status given as a parameter).
CREATE INDEX after_sales_by_status ON after_sales (status, created_at);
