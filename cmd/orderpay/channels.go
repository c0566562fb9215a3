package main

import (
	"cmp"
	"fmt"
	"path/filepath"
	"strings"

	"orderpay/buyerauth"
	"orderpay/channel/channelfile"
	"orderpay/channel/sim"
)

// channelsFile is the merchant accounts serve takes money with: those of --channels, or,
// without it, the built-in simulator's, which it starts (the demo).
func (m *Main) channelsFile() (*channelfile.File, error) {
	cfg := m.Config
	if cfg.Channels != "" {
		f, err := channelfile.Load(cfg.Channels)
		if err != nil {
			return nil, err
		}
		return f, m.checkPosture(f)
	}
	keysDir := cmp.Or(cfg.KeysDir, filepath.Join(cfg.DataDir, "keys"))
	keys, err := sim.LoadOrCreateKeys(keysDir)
	if err != nil {
		return nil, err
	}
	m.Sim, err = sim.New(sim.Config{Keys: keys, Logger: m.log.With("component", "sim")})
	if err != nil {
		return nil, err
	}
	m.closeFuncs = append(m.closeFuncs, m.Sim.Close)
	if m.SimURL, err = m.serve(cfg.SimAddr, m.Sim.Handler()); err != nil {
		return nil, fmt.Errorf("simulator: %w", err)
	}
	return channelfile.ForSimulator(keysDir, keys, m.SimURL, channelfile.AlipayKeyMode, channelfile.WechatPubKeyMode), nil
}

// checkPosture refuses to start a deployment that takes real money with a default that is
// only right for the demo. A channel not on a loopback address is a real gateway: it posts
// notifications only to public HTTPS (WeChat takes nothing else), and what they and the
// buyers send must not travel in the clear.
func (m *Main) checkPosture(f *channelfile.File) error {
	remote := f.Remote()
	if len(remote) == 0 {
		return nil
	}
	var problems []string
	if !strings.HasPrefix(m.Config.PublicURL, "https://") {
		problems = append(problems, fmt.Sprintf("--public-url must be the public https:// address the channels post notifications to (it is %q)",
			m.Config.PublicURL))
	}
	if m.Config.BuyerAuth.Mode == "" || m.Config.BuyerAuth.Mode == buyerauth.ModeNone {
		problems = append(problems, "--buyer-auth none lets anyone act as any buyer: use jwt (the shop's login issues tokens) or header (the shop's gateway names the buyer)")
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("refusing to start: %s in %s %s not on this machine, so real money moves, and:\n  - %s",
		strings.Join(remote, " and "), m.Config.Channels, plural(len(remote), "is", "are"), strings.Join(problems, "\n  - "))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
