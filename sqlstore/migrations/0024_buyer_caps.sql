-- Buyer caps (docs/operations.md, "Buyer caps"): a SKU's own cap on the units of it in one
-- order and on the units of it one buyer holds in unpaid orders (0: the shop's cap for the
-- SKU's product type), and an index to count a buyer's unpaid orders at each create.
ALTER TABLE skus ADD COLUMN max_per_order BIGINT NOT NULL DEFAULT 0 CHECK (max_per_order >= 0);
ALTER TABLE skus ADD COLUMN max_unpaid_per_buyer BIGINT NOT NULL DEFAULT 0 CHECK (max_unpaid_per_buyer >= 0);

CREATE INDEX orders_unpaid_by_buyer ON orders (buyer_id, product_type) WHERE status = 'PENDING_PAYMENT';
