package channelfile_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"orderpay"
	"orderpay/channel/channelfile"
	"orderpay/channel/sim"
)

// The file the simulator writes states both accounts' contracts, and they read back as the
// fee schedule the payment center and reconciliation use, and as the contract the simulator
// plays.
func TestSimulatorFileStatesTheFeeContracts(t *testing.T) {
	t.Parallel()
	dir, _ := simulated(t)
	f, err := channelfile.Load(filepath.Join(dir, "channels.toml"))
	if err != nil {
		t.Fatal(err)
	}
	want := orderpay.FeeRule{Rate: 60000, Rounding: orderpay.RoundHalfUp, RefundReturnsFee: true}
	fees := f.Fees()
	for _, ch := range []string{orderpay.ChannelAlipay, orderpay.ChannelWechat} {
		got, ok := fees.Rule(ch)
		if !ok || got.Rate != want.Rate || got.Rounding != want.Rounding || got.RefundReturnsFee != want.RefundReturnsFee || len(got.Methods) != 0 {
			t.Errorf("%s contract %+v, %v; want %+v", ch, got, ok, want)
		}
	}
	if missing := f.MissingFees(); len(missing) != 0 {
		t.Errorf("the simulator's file misses the contract of %v", missing)
	}
	var cfg sim.Config
	channelfile.SimulatorFees(&cfg, f)
	if cfg.AlipayFees.Rate != 60000 || cfg.WechatFees.Rate != 60000 || cfg.AlipayFees.RefundKeepsFee || cfg.WechatFees.Rounding != orderpay.RoundHalfUp {
		t.Errorf("simulator fees %+v %+v", cfg.AlipayFees, cfg.WechatFees)
	}
}

// A contract with a rate per method, another rounding and refunds keeping the fee reads
// back, encodes to a file that reads back the same, and the simulator plays it.
func TestFeeTablesReadEncodeAndPlay(t *testing.T) {
	t.Parallel()
	dir, _ := simulated(t)
	good, err := os.ReadFile(filepath.Join(dir, "channels.toml"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(good), "[wechat.fees]\nrate = \"0.60000%\"", "[wechat.fees]\nrate = \"0.38%\"", 1)
	text = strings.Replace(text, "refund_returns_fee = true", "refund_returns_fee = false", 2)
	text = strings.Replace(text, `rounding = "half_up"`, `rounding = "down"`, 1)
	text += "[wechat.fees.methods]\nh5 = \"1%\"\nbarcode = \"0.2%\"\n"
	path := filepath.Join(dir, "custom.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := channelfile.Load(path)
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	check := func(f *channelfile.File) {
		t.Helper()
		ali, _ := f.Fees().Rule(orderpay.ChannelAlipay)
		wx, _ := f.Fees().Rule(orderpay.ChannelWechat)
		if ali.Rate != 60000 || ali.Rounding != orderpay.RoundDown || ali.RefundReturnsFee {
			t.Errorf("alipay %+v", ali)
		}
		if wx.Rate != 38000 || wx.RefundReturnsFee || wx.RateFor(orderpay.MethodH5) != 100000 || wx.RateFor(orderpay.MethodBarcode) != 20000 ||
			wx.RateFor(orderpay.MethodQR) != 38000 {
			t.Errorf("wechat %+v", wx)
		}
		var cfg sim.Config
		channelfile.SimulatorFees(&cfg, f)
		if !cfg.WechatFees.RefundKeepsFee || cfg.WechatFees.Methods[orderpay.MethodH5] != 100000 || cfg.AlipayFees.Rounding != orderpay.RoundDown {
			t.Errorf("simulator fees %+v %+v", cfg.AlipayFees, cfg.WechatFees)
		}
	}
	check(f)
	again := filepath.Join(dir, "again.toml")
	if err := os.WriteFile(again, f.Encode(), 0o600); err != nil {
		t.Fatal(err)
	}
	f2, err := channelfile.Load(again)
	if err != nil {
		t.Fatalf("the encoded file does not load: %v\n%s", err, f.Encode())
	}
	check(f2)
}

// A bad fees table is refused with the key it is about; a file without one loads, and says
// which channel states no contract.
func TestBadFeeTablesAreRefused(t *testing.T) {
	t.Parallel()
	dir, _ := simulated(t)
	good, err := os.ReadFile(filepath.Join(dir, "channels.toml"))
	if err != nil {
		t.Fatal(err)
	}
	const rate = "[alipay.fees]\nrate = \"0.60000%\""
	for _, tc := range []struct{ name, from, to, want string }{
		{"a rate without %", rate, "[alipay.fees]\nrate = \"0.6\"", "[alipay.fees] rate: fee rate \"0.6\" is not a percentage"},
		{"a rate above 10%", rate, "[alipay.fees]\nrate = \"11%\"", "[alipay.fees] rate: fee rate \"11%\""},
		{"no rate", rate, "[alipay.fees]", "[alipay.fees] rate is required"},
		{"an unknown rounding", `rounding = "half_up"`, `rounding = "nearest"`, "rounding must be one of"},
		{"no refund switch", "refund_returns_fee = true", "", "refund_returns_fee is required"},
		{"a method the channel lacks", "refund_returns_fee = true", "refund_returns_fee = true\n[alipay.fees.methods]\nh5 = \"1%\"", "[alipay.fees.methods] h5: alipay has no such method"},
		{"a bad method rate", "refund_returns_fee = true", "refund_returns_fee = true\n[alipay.fees.methods]\nbarcode = \"cheap\"", "[alipay.fees.methods] barcode: fee rate"},
		{"a misspelt key", "refund_returns_fee", "refunds_return_fee", "unknown keys"},
	} {
		t.Run(tc.name, func(t *testing.T) { refuses(t, dir, good, tc.name, tc.from, tc.to, tc.want) })
	}
	i := strings.Index(string(good), "\n# The account's fee contract")
	j := strings.Index(string(good), "\n[wechat]")
	path := filepath.Join(dir, "no-alipay-fees.toml")
	if err := os.WriteFile(path, []byte(string(good)[:i]+string(good)[j:]), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := channelfile.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if m := f.MissingFees(); len(m) != 1 || m[0] != orderpay.ChannelAlipay {
		t.Fatalf("missing fees %v", m)
	}
	if _, ok := f.Fees().Rule(orderpay.ChannelAlipay); ok {
		t.Fatal("a contract for alipay, which states none")
	}
}
