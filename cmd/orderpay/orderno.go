package main

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"time"

	"orderpay/order"
)

// Order-number schemes (see order/orderno.go).
const (
	OrderNoSequence  = "sequence"
	OrderNoTimestamp = "timestamp"
)

func (c *Config) validateOrderNo() error {
	switch c.OrderNo {
	case OrderNoSequence, OrderNoTimestamp:
	default:
		return fmt.Errorf("--order-no must be sequence or timestamp, not %q", c.OrderNo)
	}
	if c.OrderNoKey != "" && len(c.OrderNoKey) < order.MinOrderNoKeyLen {
		return fmt.Errorf("--order-no-key must be at least %d bytes", order.MinOrderNoKeyLen)
	}
	return nil
}

// orderNoKeyPath is where the sequence scheme's key is kept: beside the simulator's keys,
// so that instances given the same --keys share it.
func (c *Config) orderNoKeyPath() string {
	return filepath.Join(cmp.Or(c.KeysDir, filepath.Join(c.DataDir, "keys")), order.OrderNoKeyFile)
}

// orderNoScheme is the order system's NewOrderNo for the chosen scheme. The sequence
// scheme's key is --order-no-key, or the data dir's (made on first start).
func (m *Main) orderNoScheme(cfg Config) (func(context.Context, time.Time) (string, error), error) {
	if err := cfg.validateOrderNo(); err != nil {
		return nil, err
	}
	if cfg.OrderNo == OrderNoTimestamp {
		m.log.Info("order numbers", "scheme", OrderNoTimestamp)
		return order.TimestampOrderNoFunc, nil
	}
	key, source := []byte(cfg.OrderNoKey), "--order-no-key"
	if len(key) == 0 {
		var err error
		source = cfg.orderNoKeyPath()
		if key, err = order.LoadOrCreateOrderNoKey(source); err != nil {
			return nil, err
		}
	}
	seq, err := order.NewSequenceOrderNos(m.Store, key, order.OrderSeqBlockDefault)
	if err != nil {
		return nil, err
	}
	m.log.Info("order numbers", "scheme", OrderNoSequence, "key", source, "block", order.OrderSeqBlockDefault)
	return seq.NewOrderNo, nil
}
