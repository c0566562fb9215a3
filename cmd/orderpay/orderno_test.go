package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"orderpay/order"
)

// By default serve numbers orders with the sequence scheme, keyed by a key it makes in the
// data dir on first start: two orders get distinct 20-digit numbers dated in UTC+8 that
// decode to the day's sequence 0 and 1; after a restart the key is the same and the
// numbering goes on from the next block (the rest of the first one is skipped).
func TestServeNumbersOrdersWithTheSequenceScheme(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	cfg := func(m *Main) { m.Config.DataDir = dir }
	m1, c1 := startMain(t, "", cfg)
	keyPath := filepath.Join(dir, "keys", order.OrderNoKeyFile)
	key, err := os.ReadFile(keyPath)
	if err != nil {
		t.Fatalf("no order-number key in the data dir: %v", err)
	}
	decoder, err := order.NewSequenceOrderNos(m1.Store, []byte(strings.TrimSpace(string(key))), 0)
	if err != nil {
		t.Fatal(err)
	}
	// check creates an order and checks its number: 20 digits, the UTC+8 day, and sequence
	// wantSeq, or 0 if the day is not prevDay (the sequence restarts each day).
	check := func(m *Main, c *apiClient, buyer, prevDay string, wantSeq int64) (string, string) {
		t.Helper()
		v, err := c.createOrder(ctx, buyer, "tea-longjing-250g", 1)
		if err != nil {
			t.Fatal(err)
		}
		o, err := m.Store.Order(ctx, v.OrderNo)
		if err != nil {
			t.Fatal(err)
		}
		day := order.OrderNoDay(o.CreatedAt)
		if day != prevDay {
			wantSeq = 0
		}
		if len(o.No) != 20 || strings.Trim(o.No, "0123456789") != "" || !strings.HasPrefix(o.No, day) {
			t.Fatalf("order number %q: want 20 digits starting with %s", o.No, day)
		}
		if gotDay, seq, err := decoder.Decode(o.No); err != nil || gotDay != day || seq != wantSeq {
			t.Fatalf("%s decodes to %s, %d, %v; want %s, %d", o.No, gotDay, seq, err, day, wantSeq)
		}
		return o.No, day
	}
	first, day1 := check(m1, c1, "alice", "", 0)
	second, day2 := check(m1, c1, "bob", day1, 1)
	if first == second {
		t.Fatalf("two orders got the same number %s", first)
	}
	m1.Close()

	m2, c2 := startMain(t, "", cfg)
	if again, err := os.ReadFile(keyPath); err != nil || string(again) != string(key) {
		t.Fatalf("the key changed on restart: %v", err)
	}
	if third, _ := check(m2, c2, "carol", day2, order.OrderSeqBlockDefault); third == first || third == second {
		t.Fatalf("number %s given again after a restart", third)
	}
}

// --order-no and --order-no-key, and their environment variables.
func TestServeOrderNoFlags(t *testing.T) {
	t.Setenv("ORDERPAY_ORDER_NO", "timestamp")
	m := NewMain()
	m.Stderr = io.Discard
	if err := m.ParseFlags(nil); err != nil || m.Config.OrderNo != OrderNoTimestamp {
		t.Fatalf("env: %q, %v", m.Config.OrderNo, err)
	}
	if err := m.ParseFlags([]string{"--order-no", "sequence", "--order-no-key", "a-secret-of-24-bytes-...."}); err != nil ||
		m.Config.OrderNo != OrderNoSequence || m.Config.OrderNoKey != "a-secret-of-24-bytes-...." {
		t.Fatalf("flags: %+v, %v", m.Config, err)
	}
	for _, bad := range [][]string{{"--order-no", "random"}, {"--order-no-key", "short"}} {
		if err := NewMain().ParseFlags(bad); err == nil {
			t.Fatalf("%v accepted", bad)
		}
	}
	if NewMain().Config.OrderNo != OrderNoSequence {
		t.Fatal("the default scheme is not sequence")
	}
}

// With --order-no timestamp the numbers are yyyyMMddHHmmss + 6 digits, and no key is made.
func TestServeTimestampScheme(t *testing.T) {
	t.Parallel()
	m, c := startMain(t, "", func(m *Main) { m.Config.OrderNo = OrderNoTimestamp })
	v, err := c.createOrder(context.Background(), "dave", "tea-longjing-250g", 1)
	if err != nil {
		t.Fatal(err)
	}
	o, err := m.Store.Order(context.Background(), v.OrderNo)
	if err != nil {
		t.Fatal(err)
	}
	if stamp := o.CreatedAt.In(order.ChinaTime).Format("20060102150405"); len(o.No) != 20 || !strings.HasPrefix(o.No, stamp) {
		t.Fatalf("order number %q, want %s + 6 digits", o.No, stamp)
	}
	if _, err := os.Stat(filepath.Join(m.Config.DataDir, "keys", order.OrderNoKeyFile)); err == nil {
		t.Fatal("the timestamp scheme made an order-number key")
	}
}
