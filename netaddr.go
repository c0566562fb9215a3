package orderpay

import (
	"fmt"
	"net/netip"
	"strings"
)

// ParseNetworks reads a comma-separated list of networks (10.0.0.0/8, fd00::/8) and
// addresses (127.0.0.1: a network of one), as the flags that name proxies or allowed
// networks take them. An IPv4-mapped IPv6 address is its IPv4 address.
func ParseNetworks(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if p, err := netip.ParsePrefix(part); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(part)
		if err != nil {
			return nil, fmt.Errorf("%q is neither a network (10.0.0.0/8) nor an address", part)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// InNetworks reports whether addr (an IP address, IPv4-mapped or not) is in one of nets.
// Anything that is not an address is in none.
func InNetworks(nets []netip.Prefix, addr string) bool {
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return false
	}
	ip = ip.Unmap()
	for _, p := range nets {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
