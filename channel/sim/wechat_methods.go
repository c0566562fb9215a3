package sim

import (
	"context"

	"orderpay"
)

// wechatPayInstruction is WeChat's wallet paying a jsapi, mini, h5 or app instruction.
func (s *Simulator) wechatPayInstruction(ctx context.Context, a PayAs) (*PayResult, error) {
	return nil, orderpay.Errorf(orderpay.EINVALID, "the simulated WeChat wallet does not take %s instructions yet", a.Pay.Method)
}
