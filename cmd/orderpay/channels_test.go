package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"orderpay/channel/channelfile"
	"orderpay/channel/sim"
)

// A channels file whose Alipay account is on the real gateway: serve refuses to start with
// the demo's defaults (a plain-HTTP public URL, the API's own address; buyers not
// authenticated; a generated admin token), says why for each, and has opened nothing: no
// store file, no listener.
func TestServeRefusesRealChannelsWithAPlainHTTPNotifyURL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keysDir := filepath.Join(dir, "keys")
	keys, err := sim.LoadOrCreateKeys(keysDir)
	if err != nil {
		t.Fatal(err)
	}
	f := channelfile.ForSimulator(keysDir, keys, "http://127.0.0.1:1", channelfile.AlipayKeyMode, channelfile.WechatPubKeyMode)
	f.Alipay.Gateway = "production"
	path := filepath.Join(keysDir, "channels.toml")
	if err := f.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	for _, publicURL := range []string{"", "http://shop.example.com"} {
		m := NewMain()
		var out bytes.Buffer
		m.Stdout, m.Stderr = &out, &out
		m.Config.Addr, m.Config.DataDir, m.Config.Channels, m.Config.PublicURL = "127.0.0.1:0", filepath.Join(dir, "data"), path, publicURL
		m.Config.MetricsAddr = "127.0.0.1:0"
		err := m.Run(context.Background())
		m.Close()
		if err == nil || !strings.Contains(err.Error(), "refusing to start") || !strings.Contains(err.Error(), "--public-url must be the public https:// address") ||
			!strings.Contains(err.Error(), "alipay in "+path+" is not on this machine") || !strings.Contains(err.Error(), "--buyer-auth none lets anyone act as any buyer") ||
			!strings.Contains(err.Error(), "the admin token would be generated") {
			t.Fatalf("public URL %q: %v", publicURL, err)
		}
		if m.URL != "" {
			t.Fatalf("public URL %q: the API listened at %s", publicURL, m.URL)
		}
		if _, err := os.Stat(filepath.Join(dir, "data", "orderpay.db")); !os.IsNotExist(err) {
			t.Fatalf("public URL %q: the store was opened (%v)", publicURL, err)
		}
	}
}

// `orderpay channels check` says, per channel, which pay methods are ready and what each
// missing one needs from the channels file; --json has the same per channel. Alipay's in-app
// app is checked as an account of its own, with the method made under it.
func TestChannelsCheckReportsThePayMethods(t *testing.T) {
	t.Parallel()
	keysDir := filepath.Join(t.TempDir(), "keys")
	keys, err := sim.LoadOrCreateKeys(keysDir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sim.New(sim.Config{Keys: keys, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	f := channelfile.ForSimulator(keysDir, keys, srv.URL, channelfile.AlipayKeyMode, channelfile.WechatPubKeyMode)
	f.Wechat.AppAppID, f.Wechat.H5Domains = "", nil
	f.Wechat.Fees.Methods = map[string]string{"h5": "1%"}
	f.Alipay.Fees = nil // a file without Alipay's contract
	path := filepath.Join(keysDir, "channels.toml")
	if err := f.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"channels", "check", "--channels", path}, &out, &errOut); err != nil {
		t.Fatalf("channels check: %v\n%s%s", err, out.String(), errOut.String())
	}
	for _, want := range []string{
		"wechat (pubkey, " + srv.URL + "): healthy",
		"  pay methods ready: qr, jsapi, mini\n",
		"  h5 not ready: set h5_domains",
		"  app not ready: set app_appid",
		"alipay (key, " + srv.URL + "/gateway.do): healthy\n  reachable yes, our signature accepted yes, their answer verified yes",
		"  pay methods ready: qr, pc, wap, app\n",
		"alipay app " + keys.InApp.AppID + ", for inapp (key, " + srv.URL + "/gateway.do): healthy\n  reachable yes, our signature accepted yes, their answer verified yes",
		"  pay methods ready: inapp\n",
		"wechat fees: 0.60000%, rounded half_up, refunds give back their share: true; h5 1.00000%\n",
		"alipay fees: no contract ([alipay.fees]): its fees and settlement cannot be reconciled\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("channels check printed no %q:\n%s", want, out.String())
		}
	}

	out.Reset()
	if err := run(context.Background(), []string{"channels", "check", "--channels", path, "--json"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	var reports []struct {
		Channel string `json:"channel"`
		App     string `json:"app"`
		Healthy bool   `json:"answer_verified"`
		Methods []struct {
			Method string `json:"method"`
			Ready  bool   `json:"ready"`
			Needs  string `json:"needs"`
		} `json:"methods"`
	}
	if err := json.Unmarshal(out.Bytes(), &reports); err != nil {
		t.Fatalf("%v:\n%s", err, out.String())
	}
	alipayApps := map[string]string{}
	for _, r := range reports {
		if r.Channel == "alipay" && r.Healthy {
			var methods []string
			for _, m := range r.Methods {
				if m.Ready {
					methods = append(methods, m.Method)
				}
			}
			alipayApps[r.App] = strings.Join(methods, ",")
		}
	}
	if len(alipayApps) != 2 || alipayApps[keys.AppID] != "qr,pc,wap,app" || alipayApps[keys.InApp.AppID] != "inapp" {
		t.Fatalf("the JSON reports of alipay, by app: %v", alipayApps)
	}
	for _, r := range reports {
		if r.Channel != "wechat" {
			continue
		}
		got := map[string]string{}
		for _, m := range r.Methods {
			if m.Ready != (m.Needs == "") {
				t.Fatalf("method %+v", m)
			}
			got[m.Method] = m.Needs
		}
		if !r.Healthy || len(got) != 5 || got["qr"] != "" || got["jsapi"] != "" || got["mini"] != "" ||
			!strings.Contains(got["h5"], "h5_domains") || !strings.Contains(got["app"], "app_appid") {
			t.Fatalf("the JSON report of wechat: %+v", r)
		}
		return
	}
	t.Fatalf("no wechat in %s", out.String())
}
