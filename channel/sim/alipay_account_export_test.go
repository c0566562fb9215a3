package sim

// AlipayPlantedFaults lists the faults of a day's Alipay bills, for the tests.
func AlipayPlantedFaults(s *Simulator, date string) []PlantedFault {
	return s.alipayPlantedFaults(date)
}
