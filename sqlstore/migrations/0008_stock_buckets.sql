-- A hot SKU's stock split over several rows (docs/design.md §6, flash sales): a move takes one
-- bucket's row, starting at a random one, so that buyers of the same SKU rarely wait on the
-- same row lock.
ALTER TABLE skus ADD COLUMN stock_buckets INTEGER NOT NULL DEFAULT 1;
