package sim

import "orderpay"

// PlantedFaults lists every fee and settlement fault the bills of channel carry on date
// (yyyy-MM-dd, China time), as of now, each with the money reconciliation should find
// (PlantedFault): what BillFaults and the rate changes of FeeConfig made of that day.
func (s *Simulator) PlantedFaults(channel, date string) []PlantedFault {
	switch channel {
	case orderpay.ChannelAlipay:
		return s.alipayPlantedFaults(date)
	case orderpay.ChannelWechat:
		return s.wechatPlantedFaults(date)
	}
	return nil
}
