package sim

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
)

// What WeChat checks of the page a buyer pays from (docs/channels.md §F2): a JSAPI page must
// sit under one of the merchant's registered pay directories (支付授权目录), and an H5
// cashier opens only from a page on a registered H5 domain or one of its subdomains.

// wechatHostLabel is one label of a host name.
var wechatHostLabel = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// validH5Domain reports whether d is a host name (lowercase labels, no scheme, port or
// path) or an IP address, as an H5 domain is registered.
func validH5Domain(d string) bool {
	if net.ParseIP(d) != nil {
		return true
	}
	if d == "" || len(d) > 253 {
		return false
	}
	for label := range strings.SplitSeq(d, ".") {
		if !wechatHostLabel.MatchString(label) {
			return false
		}
	}
	return true
}

// h5DomainMatches reports whether host (a page's, without port) is the registered domain or
// a subdomain of it. An IP address matches only itself.
func h5DomainMatches(host, domain string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	return host == domain || (net.ParseIP(domain) == nil && strings.HasSuffix(host, "."+domain))
}

// parseJSAPIPath reads a registered JSAPI pay directory: an http(s) URL with a host and a
// path ending in "/", without query or fragment.
func parseJSAPIPath(p string) (*url.URL, error) {
	u, err := url.Parse(p)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		!strings.HasPrefix(u.Path, "/") || !strings.HasSuffix(u.Path, "/") || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("JSAPI path %q is not a pay directory: an http(s) URL of a host and a path ending in /", p)
	}
	return u, nil
}

// jsapiPathMatches reports whether page (a Referer) sits under the pay directory dir: the
// same scheme and host, the same port when dir names one (without, any port: WeChat's pages
// use the default ones, and a shop under test listens on another), and a path under dir's.
func jsapiPathMatches(page *url.URL, dir *url.URL) bool {
	if !strings.EqualFold(page.Scheme, dir.Scheme) || !strings.EqualFold(page.Hostname(), dir.Hostname()) {
		return false
	}
	if dir.Port() != "" && page.Port() != dir.Port() {
		return false
	}
	path := page.Path
	if path == "" {
		path = "/"
	}
	return strings.HasPrefix(path, dir.Path)
}

// underJSAPIPath reports whether the page at referer sits under one of the registered pay
// directories.
func underJSAPIPath(referer string, dirs []string) bool {
	page, err := url.Parse(referer)
	if err != nil || page.Host == "" {
		return false
	}
	for _, d := range dirs {
		if dir, err := parseJSAPIPath(d); err == nil && jsapiPathMatches(page, dir) {
			return true
		}
	}
	return false
}

// onH5Domain reports whether the page at referer is on one of the registered H5 domains.
func onH5Domain(referer string, domains []string) bool {
	page, err := url.Parse(referer)
	if err != nil || page.Host == "" {
		return false
	}
	for _, d := range domains {
		if h5DomainMatches(page.Hostname(), d) {
			return true
		}
	}
	return false
}
