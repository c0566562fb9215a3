package order

import (
	"testing"
	"time"
)

// A position counts the waiting tickets the view read before the ticket, less those this
// instance ended since: an end of a ticket that arrived after the read was never counted,
// and takes nothing off.
func TestQueueViewCountsOnlyTheEndsItRead(t *testing.T) {
	now := time.Now()
	v := &queueView{}
	v.load([]int64{10, 11, 14}, now, nil)
	// 12 and 13 arrived after the read; 10, 12 and 13 ended here since.
	v.ended = append(v.ended, 10, 12, 13)
	for _, c := range []struct {
		seq  int64
		pos  int64
		inIt bool
	}{
		{11, 1, true},  // 10 ended: first
		{14, 2, true},  // 11 before it (12 and 13 were not counted)
		{15, 3, false}, // after the read: 11 and 14 before it in the view, then the index's count
	} {
		pos, in, _ := v.position(c.seq, now)
		if pos != c.pos || in != c.inIt {
			t.Errorf("seq %d: position %d (in the view %v); want %d (%v)", c.seq, pos, in, c.pos, c.inIt)
		}
	}
}
