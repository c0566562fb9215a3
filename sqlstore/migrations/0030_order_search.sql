-- The console's order search, bounded by its page whatever the history (issue 39).
--
-- By status, newest first: WHERE status = ? ORDER BY created_at DESC, order_no DESC LIMIT ?
-- reads the status's newest entries here and sorts only ties of created_at by order_no
-- (PostgreSQL's incremental sort, SQLite's "RIGHT PART OF ORDER BY"). Without it a rare
-- status walked all of orders_by_created, and SQLite sorted every order of a common one.
-- The order number is left out of the key: every order pays for this index, forever.
CREATE INDEX orders_by_status ON orders (status, created_at);

-- By the start of an order number: a byte-wise range on the primary key on SQLite; on
-- PostgreSQL on orders_by_no_bytes (order_no COLLATE "C"), made by the engine's extras
-- (ordersearch.go), so that the search is exact and indexed whatever the collation.
