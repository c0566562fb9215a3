package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/channelfile"
	"orderpay/channel/sim"
	"orderpay/channel/sim/simtest"
	"orderpay/chaos"
	"orderpay/natsbus/natstest"
	"orderpay/sqlstore"
	"orderpay/sqlstore/storetest"
)

// TestMain runs the test binary as something else when a test started it so: a NATS node
// of the cluster tests (natstest), or the orderpay command itself (ORDERPAY_TEST_AS_COMMAND=1
// and the command's arguments: the simulator, as a shop runs it beside serve).
// A server the tests start on a SQLite file that is not there yet finds it migrated
// (storetest.CopyMigratedSQLite).
func TestMain(m *testing.M) {
	natstest.RunNodeIfChild()
	openStore = func(ctx context.Context, dsn string) (*sqlstore.Store, error) {
		if files := sqlstore.SQLiteFiles(dsn); files != nil {
			if _, err := os.Stat(files[0]); os.IsNotExist(err) {
				if _, err := os.Stat(filepath.Dir(files[0])); err == nil {
					if err := storetest.CopyMigratedSQLite(files[0]); err != nil {
						return nil, err
					}
				}
			}
		}
		return sqlstore.Open(ctx, dsn)
	}
	if os.Getenv("ORDERPAY_TEST_AS_COMMAND") == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "orderpay:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	// Servers the tests start on new key directories take their keys from the tests' pool
	// (an orderpay process a test starts, above, still generates its own).
	simtest.UseKeyPool()
	os.Exit(m.Run())
}

// command is an orderpay process started by a test, stopped (SIGTERM) when it ends.
type command struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	output strings.Builder
	lines  chan string
}

func startCommand(t *testing.T, args ...string) *command {
	t.Helper()
	c := &command{cmd: exec.Command(os.Args[0], args...), lines: make(chan string, 64)}
	c.cmd.Env = append(os.Environ(), "ORDERPAY_TEST_AS_COMMAND=1")
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.cmd.Stderr = &lockedWriter{c: c}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.write(sc.Text() + "\n")
			select {
			case c.lines <- sc.Text():
			default:
			}
		}
		close(c.lines)
	}()
	t.Cleanup(func() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { c.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			c.cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", strings.Join(args[:1], ""), c.text())
		}
	})
	return c
}

func (c *command) write(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.output.WriteString(s)
}

func (c *command) text() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.output.String()
}

type lockedWriter struct{ c *command }

func (w *lockedWriter) Write(b []byte) (int, error) { w.c.write(string(b)); return len(b), nil }

// waitLine waits for a line of the command's output matching re and returns its groups.
func (c *command) waitLine(t *testing.T, re *regexp.Regexp, within time.Duration) []string {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				t.Fatalf("the command ended without printing %s:\n%s", re, c.text())
			}
			if m := re.FindStringSubmatch(line); m != nil {
				return m
			}
		case <-deadline:
			t.Fatalf("no line matching %s within %s:\n%s", re, within, c.text())
		}
	}
}

var simRunning = regexp.MustCompile(`channel simulator running at (http://\S+)`)

// startSimProcess runs `orderpay sim` as a process of its own in the given modes and returns
// its URL and the channels file it wrote.
func startSimProcess(t *testing.T, dir, alipayMode, wechatMode string, extra ...string) (simURL, channels string) {
	t.Helper()
	keys := filepath.Join(dir, "keys")
	sim := startCommand(t, append([]string{"sim", "--addr", "127.0.0.1:0", "--keys", keys, "--alipay-mode", alipayMode,
		"--wechat-mode", wechatMode, "--log-level", "warn"}, extra...)...)
	return sim.waitLine(t, simRunning, 60*time.Second)[1], filepath.Join(keys, "channels.toml")
}

// A shop's production code path, to the simulator: `orderpay sim` runs as a process of its
// own and writes the channels file of its merchant, in each of the four combinations of
// modes (Alipay public key or certificates, WeChat Pay public key or platform
// certificates); `orderpay channels check` finds every channel healthy; `serve --channels`
// with that file takes payments by both channels and refunds part of each, and the
// channels' refund notifications settle the refunds.
func TestGoLiveThroughTheChannelsFileInEveryKeyMode(t *testing.T) {
	t.Parallel()
	for _, modes := range [][2]string{{"key", "pubkey"}, {"key", "certificate"}, {"cert", "pubkey"}, {"cert", "certificate"}} {
		t.Run("alipay-"+modes[0]+"-wechat-"+modes[1], func(t *testing.T) {
			t.Parallel()
			goLive(t, modes[0], modes[1])
		})
	}
}

func goLive(t *testing.T, alipayMode, wechatMode string) {
	dir := t.TempDir()
	simURL, channels := startSimProcess(t, dir, alipayMode, wechatMode, "--refund-delay", "1s")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	var out, errOut strings.Builder
	if err := run(ctx, []string{"channels", "check", "--channels", channels}, &out, &errOut); err != nil {
		t.Fatalf("channels check: %v\n%s%s", err, out.String(), errOut.String())
	}
	// Each account is named with its mode as the file writes it.
	for _, want := range []string{"alipay (" + alipayMode + ", ", "wechat (" + wechatMode + ", ", "reachable yes, our signature accepted yes, their answer verified yes"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("channels check printed no %q:\n%s", want, out.String())
		}
	}

	m, _ := startMain(t, "", func(m *Main) { m.Config.Channels = channels })
	if m.Sim != nil {
		t.Fatal("serve --channels started the built-in simulator")
	}
	c := newAPIClient(m.URL, simURL, m.AdminToken)
	// An operator sees the modes, in the channels file's words, and the fingerprints in use,
	// never a secret: both channels in one shape, with nothing beside it.
	var raw json.RawMessage
	if err := c.call(ctx, "GET", m.URL+"/admin/channels", http.Header{"Authorization": {"Bearer " + m.AdminToken}}, nil, &raw); err != nil {
		t.Fatal(err)
	}
	var described struct {
		Channels map[string]orderpay.ChannelDescription `json:"channels"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&described); err != nil {
		t.Fatalf("GET /admin/channels is not of the one shape: %v\n%s", err, raw)
	}
	a, w := described.Channels["alipay"], described.Channels["wechat"]
	if a.Channel != "alipay" || a.Mode != alipayMode || a.AppID == "" || a.SellerID == "" || a.PublicKeySHA256 == "" ||
		w.Channel != "wechat" || w.Mode != wechatMode || w.AppID == "" || w.MchID == "" || w.MerchantSerial == "" {
		t.Fatalf("GET /admin/channels: %s", raw)
	}
	if (a.AppCertSHA256 != "") != (alipayMode == "cert") || (w.PlatformCertificates != nil) != (wechatMode == "certificate") ||
		(w.PublicKeySHA256 != "") != (wechatMode == "pubkey") {
		t.Fatalf("GET /admin/channels shows another mode's fields: %s", raw)
	}
	// And the app of in-app payments, under its own id, in its mode, with its own key.
	f, err := channelfile.Load(channels)
	if err != nil {
		t.Fatal(err)
	}
	if in := a.InApp; f.Alipay.InAppAppID == "" || in == nil || in.AppID != f.Alipay.InAppAppID ||
		in.Mode != alipayMode || in.PublicKeySHA256 == "" || in.PublicKeySHA256 == a.PublicKeySHA256 {
		t.Fatalf("GET /admin/channels shows the in-app app %s as %+v", f.Alipay.InAppAppID, a.InApp)
	}
	apiV3, err := os.ReadFile(filepath.Join(filepath.Dir(channels), "wechat", "apiv3_key.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(described); strings.Contains(string(b), strings.TrimSpace(string(apiV3))) || strings.Contains(string(b), "PRIVATE") {
		t.Fatalf("GET /admin/channels shows a secret: %s", b)
	}
	if err := c.createSKU(ctx, "tea-"+alipayMode+"-"+wechatMode, 1200, 10, "normal"); err != nil {
		t.Fatal(err)
	}
	for _, channel := range []string{orderpay.ChannelAlipay, orderpay.ChannelWechat} {
		o, err := c.createOrder(ctx, "buyer-"+channel, "tea-"+alipayMode+"-"+wechatMode, 2)
		if err != nil {
			t.Fatal(err)
		}
		p, err := c.pay(ctx, o.OrderNo, channel)
		if err != nil {
			t.Fatalf("%s pay: %v", channel, err)
		}
		if err := c.walletPay(ctx, p.QRCode); err != nil {
			t.Fatal(err)
		}
		if _, err := c.waitStatus(ctx, o.OrderNo, "PAID", 20*time.Millisecond); err != nil {
			t.Fatalf("%s: %v", channel, err)
		}
		// One of the two units back, before shipping (within the rule: approved at once).
		a, err := c.RequestAfterSale(ctx, o.OrderNo, "buyer-"+channel, "refund", "one is enough", chaos.AfterSaleItem{Line: 1, Qty: 1})
		if err != nil {
			t.Fatal(err)
		}
		waitAfterSale(ctx, t, c.Client, o.OrderNo, a.AfterSaleNo, "SUCCESS")
		// The refund took the channel a second; the worker's query comes after 5 s: the
		// channel's refund notification settled it.
		h, err := m.Store.History(ctx, orderpay.EntityRefund, a.AfterSaleNo)
		if err != nil || len(h) == 0 || h[len(h)-1].To != string(orderpay.ChannelRefundSuccess) || !strings.HasPrefix(h[len(h)-1].Reason, "refund notification") {
			t.Fatalf("%s refund %s's history %+v, %v; want it settled by the refund notification", channel, a.AfterSaleNo, h, err)
		}
		var ledger []struct {
			OutTradeNo string `json:"out_trade_no"`
			Refunded   int64  `json:"refunded"`
		}
		if err := c.call(ctx, "GET", simURL+"/sim/ledger", nil, nil, &ledger); err != nil {
			t.Fatal(err)
		}
		refunded := int64(-1)
		for _, l := range ledger {
			if l.OutTradeNo == p.PaymentNo+"A01" {
				refunded = l.Refunded
			}
		}
		if refunded != 1200 {
			t.Fatalf("%s: the channel refunded %d, want 1200", channel, refunded)
		}
	}
}

var _ io.Writer = (*lockedWriter)(nil)

// `orderpay channels check` fails, naming the channel and the reason in a merchant's words,
// for each credential a channel rejects: an app id or merchant number it does not know, a
// private key that does not match, an Alipay public key or WeChat Pay public key that is
// not the channel's, and a channel whose clock is 10 minutes off. serve refuses to start
// with such a file.
func TestChannelsCheckNamesWhatIsWrong(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, good := startSimProcess(t, filepath.Join(dir, "ok"), "key", "pubkey")
	_, skewed := startSimProcess(t, filepath.Join(dir, "skewed"), "key", "pubkey", "--clock-offset", "10m")
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	// Keys that are nobody's at the channel, in the files a merchant could mix up.
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	otherKey, _ := sim.PrivateKeyPEM(other)
	otherPub, _ := sim.PublicKeyPEM(&other.PublicKey)
	for name, content := range map[string]string{"other_private.pem": otherKey, "other_public.pem": otherPub} {
		if err := os.WriteFile(filepath.Join(filepath.Dir(good), name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	variant := func(name, from, to string) string {
		t.Helper()
		if !strings.Contains(string(data), from) {
			t.Fatalf("the channels file has no %q", from)
		}
		path := filepath.Join(filepath.Dir(good), name+".toml")
		if err := os.WriteFile(path, []byte(strings.Replace(string(data), from, to, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	line := func(key string) string {
		for _, l := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(l, key+" = ") {
				return strings.SplitN(l, "#", 2)[0]
			}
		}
		t.Fatalf("no %s in the channels file", key)
		return ""
	}
	inAppID := strings.Trim(strings.TrimSpace(strings.TrimPrefix(line("inapp_app_id"), "inapp_app_id = ")), `"`)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name, file, channel, reason string
	}{
		{"a wrong app id", variant("app-id", line("app_id"), `app_id = "2021000000000000" `), "alipay", "Alipay does not know app id 2021000000000000"},
		{"a wrong merchant number", variant("mchid", line("mch_id"), `mch_id = "1900000000" `), "wechat", "merchant number 1900000000 is not the merchant"},
		{"an app private key that does not match", variant("app-key", `app_private_key_file = "alipay/app_private_key.pem"`, `app_private_key_file = "other_private.pem"`),
			"alipay", "Alipay refused our signature: the app private key is not the one"},
		{"a merchant private key that does not match", variant("merchant-key", `merchant_private_key_file = "wechat/apiclient_key.pem"`, `merchant_private_key_file = "other_private.pem"`),
			"wechat", "WeChat Pay refused our signature: the merchant serial"},
		{"a wrong Alipay public key", variant("alipay-pub", `alipay_public_key_file = "alipay/alipay_public_key.pem"`, `alipay_public_key_file = "other_public.pem"`),
			"alipay", "Alipay's answer does not verify with the Alipay public key"},
		{"an in-app app private key that does not match", variant("inapp-key", `app_private_key_file = "alipay/inapp_app_private_key.pem"`, `app_private_key_file = "other_private.pem"`),
			"alipay app " + inAppID + ", for inapp", "Alipay refused our signature: the app private key is not the one whose public key (or certificate) is uploaded for app " + inAppID},
		{"a wrong in-app app's Alipay public key", variant("inapp-pub", `alipay_public_key_file = "alipay/inapp_alipay_public_key.pem"`, `alipay_public_key_file = "alipay/alipay_public_key.pem"`),
			"alipay app " + inAppID + ", for inapp", "Alipay's answer does not verify with the Alipay public key"},
		{"a wrong WeChat Pay public key", variant("wechat-pub", `public_key_file = "wechat/pub_key.pem"`, `public_key_file = "other_public.pem"`),
			"wechat", "WeChat Pay's answer does not verify with the WeChat Pay public key"},
		{"the channels' clock 10 minutes ahead (Alipay)", skewed, "alipay", "Alipay's clock is 10m0s ahead of this machine's"},
		{"the channels' clock 10 minutes ahead (WeChat Pay)", skewed, "wechat", "this machine's clock is more than 5 minutes off WeChat Pay's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut strings.Builder
			err := run(ctx, []string{"channels", "check", "--channels", tc.file}, &out, &errOut)
			said := false
			for _, l := range strings.Split(fmt.Sprint(err), "\n") {
				l = strings.TrimSpace(l)
				said = said || strings.HasPrefix(l, tc.channel+": ") && strings.Contains(l, tc.reason)
			}
			if err == nil || !said {
				t.Fatalf("channels check: %v; want it to name %s and say %q\n%s", err, tc.channel, tc.reason, out.String())
			}
		})
	}
	// serve refuses to start on a credential the channel rejects.
	m := NewMain()
	m.Stdout, m.Stderr = io.Discard, io.Discard
	m.Config.Addr, m.Config.DataDir, m.Config.MetricsAddr = "127.0.0.1:0", t.TempDir(), "127.0.0.1:0"
	m.Config.Channels = variant("serve-app-key", `app_private_key_file = "alipay/app_private_key.pem"`, `app_private_key_file = "other_private.pem"`)
	err = m.Run(ctx)
	m.Close()
	if err == nil || !strings.Contains(err.Error(), "refusing to start") || !strings.Contains(err.Error(), "alipay: Alipay refused our signature") {
		t.Fatalf("serve with a key Alipay refuses: %v", err)
	}
}
