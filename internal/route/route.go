package route

import (
	"context"
	"fmt"
	"net"
)

// LocalIP returns the local IP that routes to host (an IP or a name). It
// sends no packet: it asks the kernel which source address a UDP socket
// connected to host would use. A name is resolved under ctx.
func LocalIP(ctx context.Context, host string) (net.IP, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "udp", net.JoinHostPort(host, "9"))
	if err != nil {
		return nil, fmt.Errorf("route: %w", err)
	}
	defer c.Close()
	a, ok := c.LocalAddr().(*net.UDPAddr)
	if !ok || a.IP.IsUnspecified() {
		return nil, fmt.Errorf("route: no local address toward %q", host)
	}
	return a.IP, nil
}
