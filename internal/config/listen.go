package config

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"
)

// resolveTimeout bounds the name lookup of a listen address's host.
const resolveTimeout = 5 * time.Second

// lookupHost resolves a host name; tests replace it.
var lookupHost = func(ctx context.Context, host string) ([]string, error) {
	return net.DefaultResolver.LookupHost(ctx, host)
}

// checkListenHost returns what is wrong with the host part of a listen
// address, or "": it must be empty (every address), an IP address, or a
// name that resolves. Text made of digits and dots that is not an IPv4
// address (999.1.1.1) is refused without a lookup, since a resolver may
// still answer for it.
func checkListenHost(host string) string {
	if host == "" {
		return ""
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return ""
	}
	if strings.Trim(host, "0123456789.") == "" || strings.Contains(host, ":") {
		return fmt.Sprintf("host %q is not an IP address: an IPv4 address is four numbers from 0 to 255, like 127.0.0.1; an IPv6 address goes in brackets, like [::1]:50051", host)
	}
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	defer cancel()
	addrs, err := lookupHost(ctx, host)
	if err != nil || len(addrs) == 0 {
		why := "no address"
		if err != nil {
			why = err.Error()
		}
		return fmt.Sprintf("host %q does not resolve (%s); use an IP address of this machine, like 127.0.0.1 or 0.0.0.0, or a name that resolves to one", host, why)
	}
	return ""
}
