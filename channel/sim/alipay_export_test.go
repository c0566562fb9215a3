package sim

import "time"

// SetAlipayWallClock replaces the wall clock that Alipay bill download URLs expire by, so
// that a test can pass their 30 s lifetime without sleeping.
func SetAlipayWallClock(s *Simulator, now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.alipay.wallNow = now
}
