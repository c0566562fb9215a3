package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"orderpay"
	"orderpay/channel/channelfile"
	"orderpay/channel/sim"
)

// runSim is `orderpay sim`: the channel simulator alone, as a sandbox for any project that
// speaks Alipay or WeChat Pay. Its keys are written to (or read from) --keys, so that the
// other project's SDK can be configured with them, and so is a channels file,
// <keys>/channels.toml, naming them and pointing at this simulator: `orderpay serve
// --channels <keys>/channels.toml` then takes the production code path to it.
func runSim(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("orderpay sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", envOr("ORDERPAY_SIM_ADDR", "127.0.0.1:8090"), "listen address [ORDERPAY_SIM_ADDR]")
	keysDir := fs.String("keys", envOr("ORDERPAY_KEYS", "data/keys"), "directory of every key, certificate serial and id (created if missing), and of the channels file written for them [ORDERPAY_KEYS]")
	stateDir := fs.String("state", envOr("ORDERPAY_SIM_STATE", ""), "directory of the channels' state: trades, refunds, notifications due (created if missing, 0700; default <keys>/state); a restart goes on from it, delete it to start afresh [ORDERPAY_SIM_STATE]")
	alipayMode := fs.String("alipay-mode", channelfile.AlipayKeyMode, "the simulated Alipay app's mode: key (Alipay public key) or cert (public-key certificates)")
	wechatMode := fs.String("wechat-mode", channelfile.WechatPubKeyMode, "the simulated WeChat Pay merchant's mode: pubkey (WeChat Pay public key) or certificate (platform certificates)")
	clockOffset := fs.Duration("clock-offset", 0, "run the simulated channels' clocks this far off this machine's (e.g. 10m), to see a merchant's clock skew")
	rotateEvery := fs.Duration("wechat-rotate-every", 0, "with --wechat-mode certificate: issue a new platform certificate this often (0: never; POST /sim/wechat/certificates rotates at once)")
	faults := fs.String("faults", "", `fault plan: JSON, or @file (see POST /sim/faults), e.g. '{"seed":1,"rules":[{"method":"notify","kind":"drop","probability":0.5}]}'`)
	timeScale := fs.Float64("time-scale", 1, "divide every notification retry delay by this (60: a simulated minute per second)")
	refundDelay := fs.Duration("refund-delay", 0, "how long (simulated time) a refund takes to settle")
	schedule := fs.String("alipay-notify-schedule", "classic", "classic (4m,10m,10m,1h,2h,6h,15h) or immediate (3 immediate resends first)")
	closePaid := fs.String("wechat-close-paid", string(sim.WechatClosePaidRefused), "WeChat's answer to closing a paid order (unverified, §D): refused (400 ORDERPAID) or no_content (204)")
	userPayingStatus := fs.Int("wechat-userpaying-status", http.StatusAccepted, "the HTTP status of WeChat's codepay answer while the buyer is confirming (trade_state USERPAYING; unverified): 202 or 200")
	userPayingFor := fs.Duration("wechat-userpaying-for", sim.DefaultWechatUserPayingFor, "how long (simulated time) WeChat keeps a barcode order USERPAYING while the buyer does not confirm, before it ends unpaid (PAYERROR)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := parseFlags(fs, args, stdout, stderr); err != nil {
		return err
	}
	if err := noArgs(fs, stderr); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	cfg := sim.Config{TimeScale: *timeScale, RefundDelay: *refundDelay, WechatClosePaid: sim.WechatClosePaid(*closePaid),
		WechatUserPayingStatus: *userPayingStatus, WechatUserPayingFor: *userPayingFor, Logger: log}
	if *clockOffset != 0 {
		cfg.Clock = skewedClock(*clockOffset)
		cfg.WechatWallClock = cfg.Clock
	}
	if err := channelfile.SimulatorModes(&cfg, *alipayMode, *wechatMode); err != nil {
		return err
	}
	cfg.WechatCertRotateEvery = *rotateEvery
	switch *schedule {
	case "classic":
		cfg.AlipayNotifySchedule = sim.AlipayClassicNotifySchedule()
	case "immediate":
		cfg.AlipayNotifySchedule = sim.AlipayImmediateResendNotifySchedule()
	default:
		return fmt.Errorf("--alipay-notify-schedule must be classic or immediate")
	}
	if *faults != "" {
		data := []byte(*faults)
		if name, ok := strings.CutPrefix(*faults, "@"); ok {
			var err error
			if data, err = os.ReadFile(name); err != nil {
				return err
			}
		}
		plan, err := sim.ParseFaultPlan(data)
		if err != nil {
			return err
		}
		cfg.Faults = plan
	}
	keys, err := sim.LoadOrCreateKeys(*keysDir)
	if err != nil {
		return err
	}
	cfg.Keys = keys
	cfg.StateDir = *stateDir
	if cfg.StateDir == "" {
		cfg.StateDir = filepath.Join(*keysDir, "state")
	}
	// The address is bound first, for the channels file to name it; the simulator then
	// starts from the file, and charges the fee contracts it states.
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	url := "http://" + ln.Addr().String()
	file := channelfile.ForSimulator(*keysDir, keys, url, *alipayMode, *wechatMode)
	channelfile.SimulatorFees(&cfg, file)
	s, err := sim.New(cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	var h http.Handler = s.Handler()
	if *clockOffset != 0 {
		h = dated(cfg.Clock, h)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	abs, _ := filepath.Abs(*keysDir)
	channelsFile := filepath.Join(*keysDir, "channels.toml")
	if err := file.WriteFile(channelsFile); err != nil {
		return fmt.Errorf("write the channels file: %w", err)
	}
	fmt.Fprintf(stdout, "channel simulator running at %s\n", url)
	fmt.Fprintf(stdout, "  Alipay gateway:     %s/gateway.do   (app_id %s, seller_id %s)\n", url, keys.AppID, keys.SellerID)
	if keys.InApp != nil {
		fmt.Fprintf(stdout, "  Alipay in-app app:  inapp_app_id %s (in-app payments are made under it; its keys are [alipay.inapp]'s)\n", keys.InApp.AppID)
	}
	fmt.Fprintf(stdout, "  WeChat Pay v3 base: %s            (replaces https://api.mch.weixin.qq.com)\n", url)
	fmt.Fprintf(stdout, "  keys and ids:       %s  (alipay/manifest.json, wechat/manifest.json)\n", abs)
	absState, _ := filepath.Abs(cfg.StateDir)
	fmt.Fprintf(stdout, "  state:              %s  (trades, refunds, notifications due; kept across restarts)\n", absState)
	fmt.Fprintf(stdout, "  channels file:      %s  (orderpay serve --channels %s)\n", filepath.Join(abs, "channels.toml"), channelsFile)
	fmt.Fprintf(stdout, "  modes:              alipay %s, wechat %s\n", *alipayMode, *wechatMode)
	fees := file.Fees()
	for _, ch := range []string{orderpay.ChannelAlipay, orderpay.ChannelWechat} {
		if r, ok := fees.Rule(ch); ok {
			fmt.Fprintf(stdout, "  %s fees:%s%s  ([%s.fees] of the channels file)\n", ch, strings.Repeat(" ", 13-len(ch)), feeContract(r), ch)
		}
	}
	fmt.Fprintf(stdout, "  WeChat apps:        appid %s (Native, H5), jsapi_appid %s, mini_appid %s, app_appid %s\n",
		keys.Wechat.AppID, keys.Wechat.JSAPIAppID, keys.Wechat.MiniAppID, keys.Wechat.AppAppID)
	fmt.Fprintf(stdout, "  WeChat pages:       h5_domains %s; jsapi_paths %s\n", strings.Join(keys.Wechat.H5Domains, ", "), strings.Join(keys.Wechat.JSAPIPaths, ", "))
	fmt.Fprintf(stdout, "  WeChat OAuth:       GET %s/connect/oauth2/authorize?appid=%s&redirect_uri=…&response_type=code&scope=snsapi_base&state=…&buyer=NAME\n", url, keys.Wechat.JSAPIAppID)
	fmt.Fprintf(stdout, "  wallet:             POST %s/sim/pay {\"qr_code\":\"…\",\"action\":\"pay|scan|decline\"} or {\"pay\":{instruction},\"buyer\":…,\"referer\":…,\"client_ip\":…,\"user_agent\":…}\n", url)
	fmt.Fprintf(stdout, "  payment codes:      POST %s/sim/wallet/codes {\"channel\":\"alipay|wechat\",\"buyer\":…,\"behaviour\":\"confirm|password|wrong_password|never|short\",\"after_seconds\":N}\n", url)
	fmt.Fprintf(stdout, "  ledger:             GET  %s/sim/ledger\n", url)
	fmt.Fprintf(stdout, "  faults:             GET|POST|DELETE %s/sim/faults  (%d rules in force)\n", url, len(cfg.Faults.Rules))
	<-ctx.Done()
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

// skewedClock is this machine's clock moved by an offset: a channel whose clock is off.
type skewedClock time.Duration

func (c skewedClock) Now() time.Time { return time.Now().Add(time.Duration(c)) }

// dated stamps every answer's Date header from clock, as a server whose clock it is would.
func dated(clock interface{ Now() time.Time }, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Date", clock.Now().UTC().Format(http.TimeFormat))
		h.ServeHTTP(w, r)
	})
}
