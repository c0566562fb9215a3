package channelfile_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"orderpay"
	"orderpay/channel/channelfile"
	"orderpay/channel/wechat"
)

// The file the simulator writes names every WeChat method's settings; they read back into
// the adapter's configuration (the AppSecret from its file, the OAuth calls to the file's
// base_url), and the adapter built from it is ready for every method. Alipay's
// inapp_app_id reads back too.
func TestWechatMethodKeysRoundTrip(t *testing.T) {
	t.Parallel()
	dir, keys := simulated(t)
	path := filepath.Join(dir, "channels.toml")
	data, _ := os.ReadFile(path)
	if strings.Contains(string(data), keys.Wechat.OAuthSecret) {
		t.Fatalf("the channels file holds the AppSecret:\n%s", data)
	}
	f, err := channelfile.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Alipay.InAppAppID != keys.InApp.AppID {
		t.Fatalf("inapp_app_id read back as %q, want %s", f.Alipay.InAppAppID, keys.InApp.AppID)
	}
	w, err := f.WechatConfig()
	if err != nil {
		t.Fatal(err)
	}
	wk := &keys.Wechat
	if w.JSAPIAppID != wk.JSAPIAppID || w.MiniAppID != wk.MiniAppID || w.AppAppID != wk.AppAppID || w.OAuthSecret != wk.OAuthSecret ||
		strings.Join(w.H5Domains, ",") != strings.Join(wk.H5Domains, ",") || strings.Join(w.JSAPIPaths, ",") != strings.Join(wk.JSAPIPaths, ",") ||
		w.OAuthBaseURL != "http://127.0.0.1:8090" {
		t.Fatalf("wechat config: jsapi %s mini %s app %s h5 %v paths %v oauth %s", w.JSAPIAppID, w.MiniAppID, w.AppAppID, w.H5Domains, w.JSAPIPaths, w.OAuthBaseURL)
	}
	channels, err := f.Channels("")
	if err != nil {
		t.Fatal(err)
	}
	for m, needs := range channels[orderpay.ChannelWechat].(*wechat.Channel).PayMethods() {
		if needs != "" {
			t.Errorf("%s is not ready: %s", m, needs)
		}
	}
}

// Without the methods' keys the file is still good (Native alone), and the adapter says what
// each other method needs; the AppSecret can come from the environment.
func TestWechatMethodKeysAreOptional(t *testing.T) {
	dir, keys := simulated(t)
	data, _ := os.ReadFile(filepath.Join(dir, "channels.toml"))
	var kept []string
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "jsapi_") && !strings.HasPrefix(line, "mini_") && !strings.HasPrefix(line, "app_appid") &&
			!strings.HasPrefix(line, "h5_") && !strings.HasPrefix(line, "oauth_") {
			kept = append(kept, line)
		}
	}
	write(t, dir, "native.toml", strings.Join(kept, "\n"))
	f, err := channelfile.Load(filepath.Join(dir, "native.toml"))
	if err != nil {
		t.Fatal(err)
	}
	channels, err := f.Channels("")
	if err != nil {
		t.Fatal(err)
	}
	needs := channels[orderpay.ChannelWechat].(*wechat.Channel).PayMethods()
	if needs[orderpay.MethodQR] != "" || !strings.Contains(needs[orderpay.MethodJSAPI], "jsapi_appid") ||
		!strings.Contains(needs[orderpay.MethodMini], "mini_appid") || !strings.Contains(needs[orderpay.MethodApp], "app_appid") ||
		!strings.Contains(needs[orderpay.MethodH5], "h5_domains") {
		t.Fatalf("what each method needs: %v", needs)
	}

	t.Setenv("SHOP_WX_SECRET", keys.Wechat.OAuthSecret+"\n")
	write(t, dir, "env.toml", strings.Replace(string(data), `oauth_secret_file = "wechat/oauth_secret.txt"`, `oauth_secret_env = "SHOP_WX_SECRET"`, 1))
	f, err = channelfile.Load(filepath.Join(dir, "env.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if w, err := f.WechatConfig(); err != nil || w.OAuthSecret != keys.Wechat.OAuthSecret {
		t.Fatalf("the AppSecret from the environment: %v", err)
	}
}

// Malformed method keys are refused, saying which and why, never showing the AppSecret.
func TestWechatMethodKeysAreValidated(t *testing.T) {
	t.Parallel()
	dir, keys := simulated(t)
	good, _ := os.ReadFile(filepath.Join(dir, "channels.toml"))
	wk := &keys.Wechat
	paths := `jsapi_paths = ["http://127.0.0.1/pay/", "http://localhost/pay/"]`
	for _, tc := range []struct {
		name, from, to, want string
	}{
		{"a jsapi appid of another shape", `jsapi_appid = "` + wk.JSAPIAppID + `"`, `jsapi_appid = "gh_1234"`, "jsapi_appid \"gh_1234\" is not an appid"},
		{"a mini appid of another shape", `mini_appid = "` + wk.MiniAppID + `"`, `mini_appid = "wx12"`, "mini_appid \"wx12\" is not an appid"},
		{"an app appid with a space", `app_appid = "` + wk.AppAppID + `"`, `app_appid = "wx ` + wk.AppAppID[3:] + `"`, "app_appid"},
		{"one app for two methods", `app_appid = "` + wk.AppAppID + `"`, `app_appid = "` + wk.MiniAppID + `"`, "are the same appid"},
		{"an H5 domain with a scheme", `h5_domains = ["127.0.0.1", "localhost"]`, `h5_domains = ["https://shop.example.com"]`, "h5_domains: \"https://shop.example.com\" is not a domain"},
		{"an H5 domain with a port", `h5_domains = ["127.0.0.1", "localhost"]`, `h5_domains = ["shop.example.com:8443"]`, "is not a domain"},
		{"an H5 domain in capitals", `h5_domains = ["127.0.0.1", "localhost"]`, `h5_domains = ["Shop.Example.com"]`, "is not a domain"},
		{"h5 domains as one string", `h5_domains = ["127.0.0.1", "localhost"]`, `h5_domains = "shop.example.com"`, "h5_domains"},
		{"a JSAPI path without its host", paths, `jsapi_paths = ["/pay/"]`, "jsapi_paths: \"/pay/\" is not a pay directory"},
		{"a JSAPI path not ending in a slash", paths, `jsapi_paths = ["https://shop.example.com/pay"]`, "is not a pay directory"},
		{"a JSAPI path with a query", paths, `jsapi_paths = ["https://shop.example.com/pay/?a=1"]`, "is not a pay directory"},
		{"an AppSecret named twice", `oauth_secret_file =`, `oauth_secret_env = "X"` + "\noauth_secret_file =", "AppSecret once"},
		{"an AppSecret without the official account", `jsapi_appid = "` + wk.JSAPIAppID + `"`, ``, "name the official account with jsapi_appid"},
		{"an in-app app id of another shape", `inapp_app_id = "` + keys.InApp.AppID + `"`, `inapp_app_id = "wx123"`, "[alipay] inapp_app_id \"wx123\" is not an Alipay app id"},
		{"a misspelt method key", `mini_appid =`, `miniapp_id =`, "unknown keys wechat.miniapp_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(string(good), tc.from) {
				t.Fatalf("the simulator's file has no %q:\n%s", tc.from, good)
			}
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".toml")
			if err := os.WriteFile(path, []byte(strings.Replace(string(good), tc.from, tc.to, 1)), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := channelfile.Load(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
	t.Run("an AppSecret of another shape", func(t *testing.T) {
		write(t, dir, "short.secret", "not-a-secret-0123")
		write(t, dir, "secret.toml", strings.Replace(string(good), `oauth_secret_file = "wechat/oauth_secret.txt"`, `oauth_secret_file = "short.secret"`, 1))
		f, err := channelfile.Load(filepath.Join(dir, "secret.toml"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WechatConfig(); err == nil || !strings.Contains(err.Error(), "32 hex digits") || strings.Contains(err.Error(), "not-a-secret") {
			t.Fatalf("error %v", err)
		}
	})
}
