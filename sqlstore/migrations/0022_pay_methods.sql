-- Pay methods (docs/design.md §5.2): an attempt records how the buyer pays it (method), whom
-- it is for (payer: the openid or Alipay user id of a method that names the payer) and the
-- instruction the buyer's device was handed (pay, JSON). An attempt stored before this
-- version is a QR code's. At most one open attempt per payment, channel and method.
ALTER TABLE channel_orders ADD COLUMN method TEXT NOT NULL DEFAULT 'qr';
ALTER TABLE channel_orders ADD COLUMN payer TEXT NOT NULL DEFAULT '';
ALTER TABLE channel_orders ADD COLUMN pay TEXT NOT NULL DEFAULT '';
DROP INDEX channel_orders_one_open;
CREATE UNIQUE INDEX channel_orders_one_open ON channel_orders (payment_no, channel, method)
    WHERE status IN ('CREATED', 'PAYING');
