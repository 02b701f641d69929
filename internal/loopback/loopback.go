package loopback

import (
	"errors"
	"net"
	"strconv"
)

// FreePorts returns n loopback ports that are free for both TCP and UDP
// (memberlist binds both) at the time of the call.
func FreePorts(n int) ([]int, error) {
	var out []int
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for tries := 0; len(out) < n; tries++ {
		if tries > 100*n {
			return nil, errors.New("loopback: no free ports")
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		pc, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			ln.Close()
			continue
		}
		pc.Close()
		held = append(held, ln)
		out = append(out, port)
	}
	return out, nil
}
