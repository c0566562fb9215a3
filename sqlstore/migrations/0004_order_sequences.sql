-- The per-day order sequence of the second order-number scheme: the date (UTC+8)
-- followed by the day's sequence put through a keyed permutation. next is the first
-- sequence number not yet handed out on that day; instances reserve blocks of it with one
-- atomic INSERT … ON CONFLICT DO UPDATE … RETURNING, so no two ever get the same number.
CREATE TABLE order_sequences (
    day  TEXT PRIMARY KEY,
    next BIGINT NOT NULL
);
