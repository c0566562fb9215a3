package orderpay

import "fmt"

// Countdown is how a countdown of whole seconds left (time left to pay, or to confirm
// receipt) is shown in the API: with a day or more left, the Chinese "XX天hh小时mm分钟";
// with less, "hh:mm:ss" (a ticking clock reads better as digits than as "hh小时mm分钟ss秒").
// Nothing left, or less, shows zero. The pages format the seconds in the buyer's language.
func Countdown(secondsLeft int64) string {
	s := max(secondsLeft, 0)
	days, h, m, sec := s/86400, s%86400/3600, s%3600/60, s%60
	if days > 0 {
		return fmt.Sprintf("%02d天%02d小时%02d分钟", days, h, m)
	}
	return fmt.Sprintf("%02d:%02d:%02d", h, m, sec)
}
