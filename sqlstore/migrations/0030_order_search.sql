-- Statements bounded by what they return, whatever the history.
--
-- The console's search by a status, newest first: WHERE status = ? AND status <>
-- 'PENDING_PAYMENT' ORDER BY created_at DESC, order_no DESC LIMIT ? reads the status's
-- newest entries here and sorts only ties of created_at by order_no (PostgreSQL's
-- incremental sort, SQLite's temp b-tree for the last term). Without it a rare status
-- walked all of orders_by_created, and SQLite sorted every order of a common one.
-- Every order pays for this index, forever, so it is small: no order number in the key,
-- and no order awaiting payment. Those are few and have partial indexes of their own
-- (orders_pending_by_deadline, orders_unpaid_by_buyer), which the timeout sweeper and the
-- buyer's cap on unpaid orders keep using: SQLite without statistics would take an index
-- on status for them.
CREATE INDEX orders_by_status ON orders (status, created_at) WHERE status <> 'PENDING_PAYMENT';

-- Retention's clearing of delivered webhooks' bodies: only those that still have one.
CREATE INDEX webhook_deliveries_with_body ON webhook_deliveries (delivered_at) WHERE status = 'SUCCEEDED' AND payload <> '';

-- The search by the start of an order number is a byte-wise range: on SQLite on the
-- primary key (BINARY); on PostgreSQL on orders_by_no_bytes (order_no COLLATE "C"), which
-- the engine's extras make (ordersearch.go), so that it is exact and indexed whatever the
-- database's collation.
