package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"orderpay"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

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
	// The simulator's address is bound first, for the file to name it; the simulator then
	// starts from the file, and charges the fee contracts it states.
	ln, err := listenTCP(cfg.SimAddr)
	if err != nil {
		return nil, fmt.Errorf("simulator: %w", err)
	}
	simURL := "http://" + ln.Addr().String()
	f := channelfile.ForSimulator(keysDir, keys, simURL, channelfile.AlipayKeyMode, channelfile.WechatPubKeyMode)
	// The simulator remembers its trades, refunds and notifications due in the data
	// directory, as a real channel would across serve's restarts.
	simCfg := sim.Config{Keys: keys, Clock: m.simClock, Logger: m.log.With("component", "sim"),
		StateDir: filepath.Join(cfg.DataDir, "simulator"), HoldDue: true}
	channelfile.SimulatorFees(&simCfg, f)
	if m.Sim, err = sim.New(simCfg); err != nil {
		ln.Close()
		return nil, err
	}
	m.closeFuncs = append(m.closeFuncs, m.Sim.Close)
	m.serveListener(ln, m.Sim.Handler())
	m.SimURL = simURL
	return f, nil
}

// checkPosture refuses to start a deployment that takes real money with a default that is
// only right for the demo. A channel not on a loopback address is a real gateway: it posts
// notifications only to public HTTPS (WeChat takes nothing else), and what they and the
// buyers send must not travel in the clear. An external bus must ask for credentials, and
// be reached over TLS off this machine: whoever can publish on it can forge events.
// Bus flags that conflict are refused first, whatever the channels (without a channels
// file, when the bus opens).
func (m *Main) checkPosture(f *channelfile.File) error {
	if err := m.Config.Bus.checkNATS(m.Config.NATS); err != nil {
		return err
	}
	remote := f.Remote()
	if len(remote) == 0 {
		return nil
	}
	var problems []string
	if !strings.HasPrefix(m.Config.PublicURL, "https://") {
		problems = append(problems, fmt.Sprintf("--public-url must be the public https:// address the channels post notifications to (it is %q)",
			m.Config.PublicURL))
	}
	if m.Config.AdminToken == "" && m.Config.AdminTokenFile == "" && m.Config.OperatorsFile == "" {
		problems = append(problems, "the admin token would be generated and printed: name the operators with --operators-file, or set your own token with --admin-token-file (24+ characters)")
	}
	if m.Config.BuyerAuth.Mode == "" || m.Config.BuyerAuth.Mode == buyerauth.ModeNone {
		problems = append(problems, "--buyer-auth none lets anyone act as any buyer: use jwt (the shop's login issues tokens) or header (the shop's gateway names the buyer)")
	}
	problems = append(problems, m.Config.exposurePosture()...)
	problems = append(problems, m.Config.Bus.natsPosture(m.Config.NATS)...)
	if a := m.Config.MetricsAddr; a != MetricsOff && !loopbackAddr(a) && !m.Config.MetricsAllowRemote {
		problems = append(problems, fmt.Sprintf("--metrics-addr %s is not a loopback address, and the metrics show orders and payments by status to whoever reaches it: keep it on 127.0.0.1 (a local agent scrapes it), or add --metrics-allow-remote once a firewall or private network keeps the public off it", a))
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("refusing to start: %s in %s %s not on this machine, so real money moves, and:\n  - %s",
		strings.Join(remote, " and "), m.Config.Channels, plural(len(remote), "is", "are"), strings.Join(problems, "\n  - "))
}

// exposurePosture is what, with real channels, lets someone who reads the network, this
// machine's process list or a port left open act as a buyer or an operator, or read what
// the program holds: the buyers' keys fetched in the clear, tokens whose issuer or audience
// is not checked, a gateway trusted from the public internet, payment results sent in the
// clear, the admin token in the command line, the profiler off this machine.
func (c *Config) exposurePosture() []string {
	var problems []string
	auth := c.BuyerAuth
	if auth.Mode == buyerauth.ModeJWT {
		if auth.JWKSURL != "" && !hasScheme(auth.JWKSURL, "https") {
			problems = append(problems, fmt.Sprintf("--buyer-jwks-url must be https:// (it is %s): keys fetched in the clear can be swapped on the way for keys that sign any buyer's tokens",
				redactedURL(auth.JWKSURL)))
		}
		var unset []string
		if auth.Issuer == "" {
			unset = append(unset, "--buyer-jwt-issuer")
		}
		if auth.Audience == "" {
			unset = append(unset, "--buyer-jwt-audience")
		}
		if len(unset) > 0 {
			problems = append(problems, fmt.Sprintf("%s %s not set, so a token the shop's login signed for another service or another shop would be taken for a buyer's here: set the iss and aud of its buyers' tokens",
				joinAnd(unset), plural(len(unset), "is", "are")))
		}
	}
	for _, p := range c.BuyerAuth.TrustedProxies {
		if tooWide(p) {
			problems = append(problems, fmt.Sprintf("--trusted-proxies %s takes in the public internet (it is wider than a /%d and holds public addresses), so anyone could name the buyer and their address: name the gateway's own addresses",
				p, wideBits(p)))
		}
	}
	for _, u := range c.Webhooks.URLs {
		if !hasScheme(u, "https") {
			problems = append(problems, fmt.Sprintf("--webhook-url %s is plain http, so payment results and their signatures would cross the network in the clear, to be read and replayed: use https://",
				originOf(u)))
		}
	}
	for _, name := range c.SecretsOnCommandLine {
		instead := map[string]string{"admin-token": "a file named by --admin-token-file", "webhook-secret": "a file named by --webhook-secret-file", "order-no-key": "the file <keys>/order-no.key"}[name]
		problems = append(problems, fmt.Sprintf("--%s is given on the command line, where every user of this machine reads it (ps, /proc): put it in %s, or in %s",
			name, instead, envName(name)))
	}
	if c.PprofAddr != "" && !loopbackAddr(c.PprofAddr) {
		problems = append(problems, fmt.Sprintf("--pprof %s is not on a loopback address, and the profiler shows the program's memory, goroutines and command line to whoever reaches it: serve it on 127.0.0.1 or [::1] (and reach it through SSH)",
			c.PprofAddr))
	}
	return problems
}

// hasScheme reports whether rawURL is a URL of scheme (in any case).
func hasScheme(rawURL, scheme string) bool {
	u, err := url.Parse(rawURL)
	return err == nil && strings.EqualFold(u.Scheme, scheme) && u.Host != ""
}

// redactedURL is rawURL without its password, or "an unreadable URL".
func redactedURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "an unreadable URL"
	}
	return u.Redacted()
}

// originOf is rawURL's scheme and host only: its path or query may carry a key.
func originOf(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return "(a URL without a host)"
	}
	return u.Scheme + "://" + u.Host
}

// wideBits is the shortest prefix length a trusted proxy's range may have before it is
// too wide for a gateway: /8 of IPv4, /32 of IPv6 (a whole provider's block).
func wideBits(p netip.Prefix) int {
	if p.Addr().Is4() {
		return 8
	}
	return 32
}

// globalIPv6 is IPv6's global unicast space: the public addresses.
var globalIPv6 = netip.MustParsePrefix("2000::/3")

// tooWide reports whether a trusted proxies' range takes in the public internet: it is
// wider than wideBits and holds public addresses. Every IPv4 range wider than a /8 does
// (the only private /8 is 10.0.0.0/8); an IPv6 one does when it overlaps 2000::/3, so that
// fc00::/7 (unique local) is not refused.
func tooWide(p netip.Prefix) bool {
	if p.Bits() >= wideBits(p) {
		return false
	}
	return p.Addr().Is4() || p.Overlaps(globalIPv6)
}

// loopbackAddr reports whether a listen address is on a loopback address only: localhost,
// 127.0.0.0/8 or ::1, not a host left out or unspecified (every address).
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// checkCredentials is serve's start-up check of the channels of a channels file (the
// built-in simulator's need none), each account of each (Alipay's in-app app too,
// accounts): a credential a channel rejects (an app id or merchant
// number it does not know, a key that does not match, an answer that does not verify, a
// clock minutes off) stops the start, naming the channel and the reason. A channel that
// cannot be reached, or answers without saying anything of the credentials (a system
// error, a rate limit), is only warned about, so that a network blip at start does not
// keep the shop closed (payments to it are answered "unknown" and retried). A channel is
// asked up to startChecks times, so that one lost or mangled answer does not stop the
// start; a credential it rejects, it rejects every time.
func (m *Main) checkCredentials(ctx context.Context, channels map[string]orderpay.Channel) error {
	var refused []channelReport
	for _, a := range accounts(channels) {
		var r channelReport
		for try := range startChecks {
			if try > 0 {
				time.Sleep(time.Duration(try) * 200 * time.Millisecond)
			}
			if r = a.check(ctx); r.Healthy() {
				break
			}
		}
		switch c := r.CredentialCheck; {
		case c.Healthy():
			m.log.Info("channel credentials checked", "channel", c.Channel, "app", c.App, "mode", c.Mode, "endpoint", c.Endpoint, "clock_skew", c.ClockSkew)
		case !c.Reachable || c.Inconclusive:
			m.log.Warn("channel credentials not checked at start", "channel", c.Channel, "app", c.App, "problem", c.Problem)
		default:
			refused = append(refused, r)
		}
	}
	if err := unhealthy(refused); err != nil {
		return fmt.Errorf("refusing to start: %w", err)
	}
	return nil
}

// startChecks is how often serve asks a channel before it calls a credential rejected.
const startChecks = 5

// runChannels is `orderpay channels check --channels FILE`: one harmless signed call per
// configured channel (a query of a trade that does not exist), and one more per other app
// some of its methods are made under (Alipay's in-app app), and for each whether it
// answered, took our signature, signed its answer with the key in the file, and how far
// its clock is from this machine's, with the pay methods made under it. It fails, naming
// the channel (and app) and the reason, if any is not healthy.
func runChannels(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const use = "usage: orderpay channels check --channels FILE [--json]\n\n" +
		"subcommands:\n  check   one harmless signed call per merchant account of a channels file\n"
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprint(stdout, use)
		return nil
	}
	if len(args) == 0 {
		fmt.Fprint(stderr, use)
		return errUsage
	}
	if args[0] != "check" {
		fmt.Fprint(stderr, use)
		return usageErrorf("channels: %q is not a subcommand; the one there is is check", args[0])
	}
	fs := flag.NewFlagSet("orderpay channels check", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: orderpay channels check --channels FILE [--json]\n\nflags:\n")
		fs.PrintDefaults()
	}
	file := fs.String("channels", os.Getenv(envName("channels")), "the channels file to check ["+envName("channels")+"]")
	showBuiltInDefault(fs, "channels", "")
	asJSON := fs.Bool("json", false, "print the checks as one JSON array")
	if err := parseFlags(fs, args[1:], stdout, stderr); err != nil {
		return err
	}
	if *file == "" || fs.NArg() > 0 {
		fs.SetOutput(stderr)
		fs.Usage()
		return usageErrorf("channels check: --channels FILE is required, and nothing else after the flags")
	}
	f, err := channelfile.Load(*file)
	if err != nil {
		return err
	}
	channels, err := f.Channels("")
	if err != nil {
		return err
	}
	reports := checkChannels(ctx, channels)
	if *asJSON {
		if err := json.NewEncoder(stdout).Encode(reports); err != nil {
			return err
		}
	} else {
		for _, r := range reports {
			printCheck(stdout, r)
			printMethods(stdout, r.Methods)
		}
		printFees(stdout, f)
	}
	return unhealthy(reports)
}

// printFees writes each channel's fee contract, or that the file states none.
func printFees(w io.Writer, f *channelfile.File) {
	fees := f.Fees()
	for _, ch := range []string{orderpay.ChannelAlipay, orderpay.ChannelWechat} {
		if r, ok := fees.Rule(ch); ok {
			fmt.Fprintf(w, "%s fees: %s\n", ch, feeContract(r))
		}
	}
	for _, ch := range f.MissingFees() {
		fmt.Fprintf(w, "%s fees: no contract ([%s.fees]): its fees and settlement cannot be reconciled\n", ch, ch)
	}
}

// feeContract is a contract in a line: its rate, rounding, refund rule and method rates.
func feeContract(r orderpay.FeeRule) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s, rounded %s, refunds give back their share: %v", r.Rate, r.RoundingRule(), r.RefundReturnsFee)
	for _, m := range slices.Sorted(maps.Keys(r.Methods)) {
		fmt.Fprintf(&b, "; %s %s", m, r.Methods[m])
	}
	return b.String()
}

// methodReporter is an adapter that says which pay methods it is set up for: for each
// method of its channel, "" when it is ready, else what the channels file still needs.
type methodReporter interface {
	PayMethods() map[orderpay.PayMethod]string
}

// methodReport is one pay method of a channel in `channels check`: ready, or what it needs.
type methodReport struct {
	Method orderpay.PayMethod `json:"method"`
	Ready  bool               `json:"ready"`
	Needs  string             `json:"needs,omitempty"`
}

// channelReport is one account of a channel in `channels check --json`: its credential check
// (App names the app of an Alipay account) and the pay methods made under it.
type channelReport struct {
	orderpay.CredentialCheck
	Methods []methodReport `json:"methods,omitempty"`
	// label names the account in what is printed: the channel for its own account, the
	// channel, app and methods for another.
	label string
}

// account is one account a channel's calls are signed as: the channel's own, or another app
// some of its methods are made under (orderpay.ChannelFor: Alipay's in-app app), with the
// pay methods made under it.
type account struct {
	ch      orderpay.Channel
	own     bool
	methods []methodReport
}

// accounts are the accounts of the channels, in the channels' name order, each channel's
// own first, then the others in the order of their methods.
func accounts(channels map[string]orderpay.Channel) []account {
	var out []account
	for _, name := range slices.Sorted(maps.Keys(channels)) {
		ch := channels[name]
		accts := []account{{ch: ch, own: true}}
		reports := payMethods(ch)
		for _, m := range orderpay.ChannelMethods[name] {
			under := orderpay.ChannelFor(ch, m)
			i := slices.IndexFunc(accts, func(a account) bool { return a.ch == under })
			if i < 0 {
				accts = append(accts, account{ch: under})
				i = len(accts) - 1
			}
			if j := slices.IndexFunc(reports, func(r methodReport) bool { return r.Method == m }); j >= 0 {
				accts[i].methods = append(accts[i].methods, reports[j])
			}
		}
		out = append(out, accts...)
	}
	return out
}

// check makes the account's harmless signed call.
func (a account) check(ctx context.Context) channelReport {
	r := channelReport{Methods: a.methods}
	if checker, ok := a.ch.(orderpay.CredentialChecker); ok {
		r.CredentialCheck = checker.CheckCredentials(ctx)
	} else {
		r.CredentialCheck = orderpay.CredentialCheck{Channel: a.ch.Name(), Problem: "this channel cannot check its credentials"}
	}
	r.label = r.Channel
	if !a.own {
		names := make([]string, len(a.methods))
		for i, m := range a.methods {
			names[i] = string(m.Method)
		}
		r.label = fmt.Sprintf("%s app %s, for %s", r.Channel, r.App, strings.Join(names, ", "))
	}
	return r
}

// payMethods lists ch's methods in the channel's order (orderpay.ChannelMethods), or nil
// when its adapter does not say.
func payMethods(ch orderpay.Channel) []methodReport {
	r, ok := ch.(methodReporter)
	if !ok {
		return nil
	}
	needs := r.PayMethods()
	var out []methodReport
	for _, m := range orderpay.ChannelMethods[ch.Name()] {
		if n, ok := needs[m]; ok {
			out = append(out, methodReport{Method: m, Ready: n == "", Needs: n})
		}
	}
	return out
}

// printMethods prints which methods are ready, then each one that is not with what it
// needs. Setting a method up is the merchant's choice, so a missing one is not unhealthy.
func printMethods(w io.Writer, methods []methodReport) {
	if len(methods) == 0 {
		return
	}
	var ready []string
	for _, m := range methods {
		if m.Ready {
			ready = append(ready, string(m.Method))
		}
	}
	fmt.Fprintf(w, "  pay methods ready: %s\n", cmp.Or(strings.Join(ready, ", "), "none"))
	for _, m := range methods {
		if !m.Ready {
			fmt.Fprintf(w, "  %s not ready: %s\n", m.Method, m.Needs)
		}
	}
}

// checkChannels checks every account of every channel at once (accounts).
func checkChannels(ctx context.Context, channels map[string]orderpay.Channel) []channelReport {
	accts := accounts(channels)
	out := make([]channelReport, len(accts))
	var wg sync.WaitGroup
	for i, a := range accts {
		wg.Go(func() { out[i] = a.check(ctx) })
	}
	wg.Wait()
	return out
}

func printCheck(w io.Writer, r channelReport) {
	c := r.CredentialCheck
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	skew := "unknown"
	if c.SkewKnown {
		skew = c.ClockSkew.String()
	}
	status := "healthy"
	if !c.Healthy() {
		status = "NOT healthy: " + c.Problem
	}
	fmt.Fprintf(w, "%s (%s, %s): %s\n  reachable %s, our signature accepted %s, their answer verified %s, clock skew %s\n",
		r.label, c.Mode, c.Endpoint, status, yes(c.Reachable), yes(c.SignatureAccepted), yes(c.AnswerVerified), skew)
	if c.Detail != "" {
		fmt.Fprintf(w, "  the channel said: %s\n", c.Detail)
	}
}

// unhealthy is the error naming every account (the channel, and the app of another one)
// whose check failed, or nil.
func unhealthy(reports []channelReport) error {
	var bad []string
	for _, r := range reports {
		if !r.Healthy() {
			bad = append(bad, r.label+": "+r.Problem)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return errors.New("channels not healthy:\n  " + strings.Join(bad, "\n  "))
}
