package main

import (
	"bufio"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"orderpay"
	"orderpay/channel/channelfile"
	"orderpay/channel/sim"
)

// An account on a real gateway whose channels file states no fee contract: serve still
// starts and takes money, but warns that the account's fees and settlement cannot be
// reconciled, naming the table to add; the account whose contract the file states is not
// named. The gateway refuses connections at once (nothing listens at 0.0.0.0:1), so the
// credential check at start is inconclusive and only warns, as with a channel that is down.
func TestServeWarnsWhenARealAccountStatesNoFeeContract(t *testing.T) {
	t.Parallel()
	keysDir := filepath.Join(t.TempDir(), "keys")
	keys, err := sim.LoadOrCreateKeys(keysDir)
	if err != nil {
		t.Fatal(err)
	}
	f := channelfile.ForSimulator(keysDir, keys, "http://127.0.0.1:1", channelfile.AlipayKeyMode, channelfile.WechatPubKeyMode)
	f.Alipay.Gateway = "https://0.0.0.0:1/gateway.do"
	f.Alipay.Fees = nil
	channels := filepath.Join(keysDir, "channels.toml")
	if err := f.WriteFile(channels); err != nil {
		t.Fatal(err)
	}
	if remote := mustLoad(t, channels).Remote(); len(remote) == 0 {
		t.Fatalf("the file's accounts are all on this machine: %s", f.Encode())
	}
	m, out := liveMain(t, channels, "", BusConfig{})
	m.Config.BuyerAuth.SecretFile = writeSecret(t, "buyer-jwt.secret", "a-buyer-token-secret-of-32-bytes-or-more")
	if err := m.Run(context.Background()); err != nil {
		m.Close()
		t.Fatalf("serve did not start: %v\n%s", err, out)
	}
	t.Cleanup(func() { m.Close() })
	if _, ok := m.fees.Rule(orderpay.ChannelAlipay); ok {
		t.Errorf("serve has a contract for alipay, whose file states none: %+v", m.fees)
	}
	if r, ok := m.fees.Rule(orderpay.ChannelWechat); !ok || r.Rate != 60000 || !r.RefundReturnsFee {
		t.Errorf("serve's wechat contract %+v, %v; want the file's 0.6 %%, refunds giving their share back", r, ok)
	}
	log := out.String()
	mustContain(t, "serve's log", log, "the channels file states no fee contract for alipay",
		"its fees and each day's settlement cannot be reconciled", "add a [alipay.fees] table")
	mustNotContain(t, "serve's log", log, "no fee contract for wechat", "[wechat.fees] table")
	t.Logf("log:\n%s", log)
}

// orderpay sim says which contract it charges: the one the channels file it writes states,
// for a sandbox's user to reconcile against.
func TestSimCommandPrintsTheFeeContractsOfItsFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"sim", "--addr", "127.0.0.1:0", "--log-level", "warn", "--keys", dir}, pw, io.Discard)
		pw.Close()
	}()
	var banner []string
	lines := bufio.NewScanner(pr)
	for lines.Scan() {
		banner = append(banner, lines.Text())
		if strings.Contains(lines.Text(), "faults:") { // the banner's last line
			break
		}
	}
	cancel()
	go io.Copy(io.Discard, pr)
	if err := <-done; err != nil {
		t.Fatalf("orderpay sim: %v", err)
	}
	text := strings.Join(banner, "\n")
	mustContain(t, "orderpay sim's banner", text,
		"\n  alipay fees:       0.60000%, rounded half_up, refunds give back their share: true  ([alipay.fees] of the channels file)\n",
		"\n  wechat fees:       0.60000%, rounded half_up, refunds give back their share: true  ([wechat.fees] of the channels file)\n")
	fees := mustLoad(t, filepath.Join(dir, "channels.toml")).Fees()
	for _, ch := range []string{orderpay.ChannelAlipay, orderpay.ChannelWechat} {
		if r, ok := fees.Rule(ch); !ok || r.Rate != 60000 || r.RoundingRule() != orderpay.RoundHalfUp || !r.RefundReturnsFee {
			t.Errorf("the written file's %s contract %+v, %v", ch, r, ok)
		}
	}
}
