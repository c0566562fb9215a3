package chaos

import (
	"context"
	"testing"
	"time"

	"orderpay"
)

// A small `bench pos` of each wallet through a real server: every sale answered PAID, one
// paid trade at the channel for each, and per paid payment exactly the two signed calls
// its RSA floor counts (the payment call and the confirming query). No timing is asserted.
func TestPosBenchPaysEverySaleWithTwoSignedCalls(t *testing.T) {
	t.Parallel()
	for _, ch := range []string{orderpay.ChannelAlipay, orderpay.ChannelWechat} {
		t.Run(ch, func(t *testing.T) {
			t.Parallel()
			rep, err := PosBench(context.Background(), PosBenchConfig{Payments: 12, Concurrency: 3, Channel: ch,
				RSAMeasure: 20 * time.Millisecond, Binary: serverBinary(t)})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Pass() || rep.Paid != 12 || rep.Outcomes["PAID"] != 12 || rep.LedgerPaid != 15 {
				t.Fatalf("not every sale paid once: %+v", rep)
			}
			if s, v := PosRSAOps(); rep.RSASigns != s || rep.RSAVerifies != v || s != 2 || v != 2 {
				t.Fatalf("floor %d signs + %d verifies, want 2 + 2", rep.RSASigns, rep.RSAVerifies)
			}
			want := map[string]float64{ch + ".pay": 1, ch + ".query": 1}
			if len(rep.ChannelCallsByMethod) != len(want) {
				t.Fatalf("channel calls per paid payment %v, want %v", rep.ChannelCallsByMethod, want)
			}
			for k, n := range want {
				if rep.ChannelCallsByMethod[k] != n {
					t.Fatalf("channel calls per paid payment %v, want %v", rep.ChannelCallsByMethod, want)
				}
			}
			if rep.ServerCPUSeconds < 0 || rep.RSAPerPaidPaymentMS <= 0 {
				t.Fatalf("CPU %v s, floor %v ms", rep.ServerCPUSeconds, rep.RSAPerPaidPaymentMS)
			}
		})
	}
}
