-- Retention: what only operators read goes after a while; these indexes find it without
-- scanning (notification_log has its index by time already).
CREATE INDEX query_log_by_time ON query_log (at);
CREATE INDEX outbox_published ON outbox (published_at) WHERE published_at > 0;
CREATE INDEX history_raw_by_time ON history (at) WHERE raw <> '';
CREATE INDEX webhook_attempts_by_time ON webhook_attempts (at);
CREATE INDEX stock_holds_ended ON stock_holds (updated_at) WHERE state <> 'HELD';
