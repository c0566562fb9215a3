package sim

import (
	"context"

	"orderpay"
)

// alipayPayInstruction is Alipay's wallet paying a pc, wap, app or inapp instruction.
func (s *Simulator) alipayPayInstruction(ctx context.Context, a PayAs) (*PayResult, error) {
	return nil, orderpay.Errorf(orderpay.EINVALID, "the simulated Alipay wallet does not take %s instructions yet", a.Pay.Method)
}
