package main

import (
	"bytes"
	"context"
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
