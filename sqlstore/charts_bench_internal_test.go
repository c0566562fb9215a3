package sqlstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"orderpay"
)

// A day's chart against an hour's, on each engine: 24 hours of ten latency buckets and four
// outcomes, against one. The read costs the same: two rows of running totals either way.
func BenchmarkChartDayAgainstHour(b *testing.B) {
	for _, engine := range []string{"sqlite", "postgres"} {
		b.Run(engine, func(b *testing.B) {
			s := openEngine(b, engine)
			ctx := context.Background()
			const last = 493000
			for h := int64(last - 30); h <= last; h++ {
				lat, out := map[string]int64{}, map[string]int64{}
				for i := range 10 {
					lat[fmt.Sprint(orderpay.PaidLatencyBounds[20+i].Milliseconds())] = int64(i + 1)
				}
				for i, r := range []string{"0:bad_signature", "1:applied", "1:duplicate", "1:ignored"} {
					out[r] = int64(10 * (i + 1))
				}
				if err := s.InTx(ctx, func(tx orderpay.Tx) error {
					if err := tx.(*queries).addChartTotal(ctx, h, chartPaidLatency, lat); err != nil {
						return err
					}
					return tx.(*queries).addChartTotal(ctx, h, chartNotification, out)
				}); err != nil {
					b.Fatal(err)
				}
			}
			for _, hours := range []int64{1, 24} {
				since := time.UnixMilli((last - hours + 1) * msPerHour)
				b.Run(fmt.Sprintf("%dh", hours), func(b *testing.B) {
					for b.Loop() {
						if _, err := s.PaidLatencyCounts(ctx, since); err != nil {
							b.Fatal(err)
						}
						if _, err := s.NotificationOutcomes(ctx, since); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}
