package webhook

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"orderpay"
)

// A webhook URL is given by whoever registers an app, so orderpay must not become their
// way into its own network: a webhook is never posted to a loopback, private, link-local,
// multicast, unspecified or otherwise reserved address, unless the operator allows the
// network (Config.AllowNetworks, serve --webhook-allow-networks). The address is checked
// when the connection is made, after the name is resolved, so a name that resolves to a
// public address when the URL is registered and to an internal one later (DNS rebinding)
// is refused too; a URL whose host is such an address written out is refused when it is
// registered (CheckURL).

// refusedNetworks are the networks no webhook may reach unless allowed, besides what
// netip.Addr's own predicates catch (loopback, private, link-local, multicast,
// unspecified).
var refusedNetworks = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "this-network"},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"}, // with 255.255.255.255, broadcast
	{netip.MustParsePrefix("::/96"), "IPv4-compatible"},
	{netip.MustParsePrefix("100::/64"), "discard-only"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
}

// nat64 is the well-known NAT64 prefix: its addresses reach the IPv4 address in their last
// four bytes, which is checked instead.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// TargetError is a webhook address refused: internal, and in no allowed network.
type TargetError struct {
	Addr netip.Addr
	What string // e.g. "loopback"
}

func (e *TargetError) Error() string {
	return fmt.Sprintf("webhook target %s is a %s address, which webhooks may not reach (serve --webhook-allow-networks allows a network)", e.Addr, e.What)
}

// CheckAddr says why a webhook may not be posted to addr (a *TargetError), or nil if it may:
// a public address, or one in a network of allow.
func CheckAddr(addr netip.Addr, allow []netip.Prefix) error {
	addr = addr.Unmap() // ::ffff:127.0.0.1 is 127.0.0.1
	for _, p := range allow {
		if p.Contains(addr) {
			return nil
		}
	}
	what := ""
	switch {
	case !addr.IsValid():
		what = "invalid"
	case addr.IsUnspecified():
		what = "unspecified"
	case addr.IsLoopback():
		what = "loopback"
	case addr.IsPrivate():
		what = "private"
	case addr.IsLinkLocalUnicast():
		what = "link-local"
	case addr.IsMulticast(), addr.IsLinkLocalMulticast(), addr.IsInterfaceLocalMulticast():
		what = "multicast"
	case nat64.Contains(addr):
		b := addr.As16()
		if err := CheckAddr(netip.AddrFrom4([4]byte(b[12:16])), allow); err != nil {
			return &TargetError{Addr: addr, What: "NAT64 " + err.(*TargetError).What}
		}
		return nil
	default:
		for _, n := range refusedNetworks {
			if n.prefix.Contains(addr) {
				what = n.what
				break
			}
		}
	}
	if what == "" {
		return nil
	}
	return &TargetError{Addr: addr, What: what}
}

// CheckURL refuses, when a webhook URL is registered, one whose host is written as an
// address CheckAddr refuses, or is localhost; a name is checked again at every connection.
// The error is EINVALID and does not quote the URL (it may carry credentials).
func CheckURL(raw string, allow []netip.Prefix) error {
	u, err := url.Parse(raw)
	if err != nil {
		return orderpay.Errorf(orderpay.EINVALID, "webhook URL is not a URL")
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		host = "127.0.0.1"
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return nil // a name (or a form only a resolver reads): checked at each connection
	}
	if err := CheckAddr(addr, allow); err != nil {
		return orderpay.Errorf(orderpay.EINVALID, "webhook URL host %s is a %s address, which webhooks may not reach", u.Hostname(), err.(*TargetError).What)
	}
	return nil
}

// NewClient is the client webhooks are posted with: each connection's address checked
// against allow as it is made (after name resolution, so DNS rebinding cannot pass), no
// proxy, no redirect followed (a 3xx is a failed attempt), and timeout for the whole
// request.
func NewClient(timeout time.Duration, allow []netip.Prefix) *http.Client {
	allow = append([]netip.Prefix(nil), allow...)
	dialer := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second,
		Control: func(network, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("webhook: cannot tell the address of %q", address)
			}
			return CheckAddr(ap.Addr(), allow)
		}}
	tr := &http.Transport{
		Proxy:                 nil, // a proxy would be the address checked, not the receiver
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{Timeout: timeout, Transport: tr, CheckRedirect: noRedirect}
}

// noRedirect has the client return a 3xx as it is: a webhook is never re-posted elsewhere.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
