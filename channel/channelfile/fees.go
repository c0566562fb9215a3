package channelfile

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"orderpay"
	"orderpay/channel/sim"
)

// Fees is a channel's fees table, [alipay.fees] or [wechat.fees]: the merchant account's
// contract with the channel, which reconciliation checks every bill against
// (docs/reconciliation.md).
type Fees struct {
	// Rate is the contracted rate of every payment, a percentage with at most five
	// decimals ("0.6%"). Required.
	Rate string `toml:"rate"`
	// Rounding is how a fee rounds to the fen: half_up (the default), half_even, down or up.
	Rounding string `toml:"rounding"`
	// RefundReturnsFee says whether a refund gives back its share of the payment's fee.
	// Required: it is not confirmed on either channel, so the contract must say.
	RefundReturnsFee *bool `toml:"refund_returns_fee"`
	// Methods is a rate per pay method where the contract charges another ([… .fees.methods]).
	Methods map[string]string `toml:"methods"`
}

// validate checks the table of channel and returns its rule.
func (fs *Fees) rule(channel string) (orderpay.FeeRule, error) {
	table := "[" + channel + ".fees]"
	var r orderpay.FeeRule
	if fs.Rate == "" {
		return r, fmt.Errorf(`%s rate is required: the contracted rate, such as "0.6%%"`, table)
	}
	var err error
	if r.Rate, err = orderpay.ParseFeeRate(fs.Rate); err != nil {
		return r, fmt.Errorf("%s rate: %s", table, orderpay.ErrorMessage(err))
	}
	if fs.Rounding != "" {
		if !slices.Contains(orderpay.FeeRoundings, orderpay.FeeRounding(fs.Rounding)) {
			return r, fmt.Errorf("%s rounding must be one of %v, not %q", table, orderpay.FeeRoundings, fs.Rounding)
		}
		r.Rounding = orderpay.FeeRounding(fs.Rounding)
	}
	if fs.RefundReturnsFee == nil {
		return r, fmt.Errorf("%s refund_returns_fee is required (true or false): whether a refund gives back its share of the fee, as the contract says", table)
	}
	r.RefundReturnsFee = *fs.RefundReturnsFee
	methods := append(slices.Clone(orderpay.ChannelMethods[channel]), orderpay.MethodBarcode)
	for _, name := range slices.Sorted(maps.Keys(fs.Methods)) {
		m := orderpay.PayMethod(name)
		if !slices.Contains(methods, m) {
			return r, fmt.Errorf("[%s.fees.methods] %s: %s has no such method; use %v", channel, name, channel, methods)
		}
		rate, err := orderpay.ParseFeeRate(fs.Methods[name])
		if err != nil {
			return r, fmt.Errorf("[%s.fees.methods] %s: %s", channel, name, orderpay.ErrorMessage(err))
		}
		if r.Methods == nil {
			r.Methods = map[orderpay.PayMethod]orderpay.FeeRate{}
		}
		r.Methods[m] = rate
	}
	return r, nil
}

// Fees is every channel's contract the file states, by channel name; a channel without a
// fees table has none (its fees and settlement are not reconciled). The file was validated
// when loaded.
func (f *File) Fees() orderpay.FeeSchedule {
	out := orderpay.FeeSchedule{}
	for _, c := range []struct {
		name string
		fees *Fees
	}{{orderpay.ChannelAlipay, f.alipayFees()}, {orderpay.ChannelWechat, f.wechatFees()}} {
		if c.fees == nil {
			continue
		}
		if r, err := c.fees.rule(c.name); err == nil {
			out[c.name] = r
		}
	}
	return out
}

func (f *File) alipayFees() *Fees {
	if f == nil || f.Alipay == nil {
		return nil
	}
	return f.Alipay.Fees
}

func (f *File) wechatFees() *Fees {
	if f == nil || f.Wechat == nil {
		return nil
	}
	return f.Wechat.Fees
}

// validateFees checks both fees tables.
func (f *File) validateFees() error {
	if fs := f.alipayFees(); fs != nil {
		if _, err := fs.rule(orderpay.ChannelAlipay); err != nil {
			return err
		}
	}
	if fs := f.wechatFees(); fs != nil {
		if _, err := fs.rule(orderpay.ChannelWechat); err != nil {
			return err
		}
	}
	return nil
}

// MissingFees lists the channels of the file that state no fee contract.
func (f *File) MissingFees() []string {
	var out []string
	if f.Alipay != nil && f.Alipay.Fees == nil {
		out = append(out, orderpay.ChannelAlipay)
	}
	if f.Wechat != nil && f.Wechat.Fees == nil {
		out = append(out, orderpay.ChannelWechat)
	}
	return out
}

// simulatorFees is the fees table ForSimulator writes: 0.6 %, half up, refunds give back
// their share, as the simulator plays by default.
func simulatorFees() *Fees {
	yes := true
	return &Fees{Rate: orderpay.FeeRate(sim.DefaultFeeRate).String(), Rounding: string(orderpay.RoundHalfUp), RefundReturnsFee: &yes}
}

// SimulatorFees sets a simulator's accounts to play the contracts the file states, so that
// the built-in simulator charges exactly what the file says; a channel without a fees
// table keeps the simulator's default.
func SimulatorFees(cfg *sim.Config, f *File) {
	fees := f.Fees()
	for ch, dst := range map[string]*sim.FeeConfig{orderpay.ChannelAlipay: &cfg.AlipayFees, orderpay.ChannelWechat: &cfg.WechatFees} {
		r, ok := fees[ch]
		if !ok {
			continue
		}
		dst.Rate, dst.Methods, dst.Rounding, dst.RefundKeepsFee = r.Rate, maps.Clone(r.Methods), r.Rounding, !r.RefundReturnsFee
	}
}

// encodeFees writes a fees table.
func encodeFees(line func(string, ...any), channel string, fs *Fees) {
	if fs == nil {
		return
	}
	line("")
	line("# The account's fee contract: reconciliation checks every fee and each day's settlement against it.")
	line("[%s.fees]", channel)
	line("rate = %s               # the contracted rate of a payment", strconv.Quote(fs.Rate))
	if fs.Rounding != "" {
		line("rounding = %s       # how a fee rounds to the fen: half_up, half_even, down or up", strconv.Quote(fs.Rounding))
	}
	if fs.RefundReturnsFee != nil {
		line("refund_returns_fee = %v      # does a refund give back its share of the fee? as the contract says", *fs.RefundReturnsFee)
	}
	if len(fs.Methods) > 0 {
		line("[%s.fees.methods]                # a rate per pay method where it differs", channel)
		for _, m := range slices.Sorted(maps.Keys(fs.Methods)) {
			line("%s = %s", m, strconv.Quote(fs.Methods[m]))
		}
	}
}
