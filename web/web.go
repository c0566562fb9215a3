// Package web holds orderpay's pages: the buyer's (catalogue, cart, orders, the pay page),
// the operations console, the till (the counter's cashier), and the simulator's wallet
// page. They are plain HTML, CSS and JavaScript embedded in the binary, with no build step;
// everything they show comes from the JSON API, so they hold no logic the API does not
// check again.
package web

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed static
var files embed.FS

var static, _ = fs.Sub(files, "static")

// pageOf maps a request path to its page: the pages are static, and read what they show
// (an order number, say) from the path in the browser.
func pageOf(p string) string {
	switch {
	case p == "/":
		return "index.html"
	case p == "/orders":
		return "orders.html"
	case strings.HasPrefix(p, "/orders/"):
		return "order.html"
	case strings.HasPrefix(p, "/pay/"):
		return "pay.html"
	case p == "/ops":
		return "ops.html"
	case p == "/pos":
		return "pos.html"
	case p == "/docs":
		return "docs.html"
	case p == "/sim/wallet":
		return "wallet.html"
	case strings.HasPrefix(p, "/assets/"), strings.HasPrefix(p, "/sim/assets/"):
		return "assets/" + path.Base(p)
	}
	return ""
}

// Pages serves the buyer's pages, the console, the till and the API reference: /, /orders,
// /orders/{no}, /pay/{no} (an order's, or a queue ticket's), /ops, /pos, /docs and
// /assets/{file}. The caller routes only those paths here.
func Pages() http.Handler { return http.HandlerFunc(serve) }

// Wallet serves the simulator's wallet page: /sim/wallet and /sim/assets/{file}.
func Wallet() http.Handler { return http.HandlerFunc(serve) }

func serve(w http.ResponseWriter, r *http.Request) {
	name := pageOf(r.URL.Path)
	b, err := fs.ReadFile(static, name)
	if name == "" || err != nil {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	switch path.Ext(name) {
	case ".html":
		h.Set("Content-Type", "text/html; charset=utf-8")
	case ".css":
		h.Set("Content-Type", "text/css; charset=utf-8")
	case ".js":
		h.Set("Content-Type", "text/javascript; charset=utf-8")
	}
	// The pages fetch everything from the same origin, run no inline script, and must not
	// be framed; the console holds an admin token in sessionStorage. Images may be blob:
	// URLs: with a buyer token the QR image is fetched with it and shown from a blob.
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data: blob:; style-src 'self'; script-src 'self'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
	_, _ = w.Write(b)
}
