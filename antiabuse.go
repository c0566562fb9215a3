package orderpay

import "time"

// Blocked kinds: a buyer id, or a device id (the X-Device-Id header of the buyer's app).
const (
	BlockBuyer  = "buyer"
	BlockDevice = "device"
)

// BlockEntry is one blocked buyer or device: it can create no order.
type BlockEntry struct {
	Kind      string
	Value     string
	Reason    string
	CreatedAt time.Time
}
