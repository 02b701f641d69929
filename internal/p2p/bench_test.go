package p2p

import (
	"context"
	"io"
	"net"
	"testing"

	"github.com/ringtail-ml/ringtail/internal/transport"
)

// BenchmarkBulk moves 64 MiB per iteration, in 1 MiB writes, over one
// established connection of each network on loopback: transport.Sockets
// over TCP (the default data plane, 4 MiB socket buffers) and p2p.Network (a
// yamux stream in a Noise session over TCP). The ratio of their MB/s is the
// cost of the libp2p data-plane mode; see docs/libp2p.md.
func BenchmarkBulk(b *testing.B) {
	const size, write = 64 << 20, 1 << 20
	for _, tc := range []struct {
		name string
		mk   func(b *testing.B) (tx, rx transport.Network)
	}{
		{"tcp", func(b *testing.B) (transport.Network, transport.Network) {
			s, err := transport.NewSockets(transport.SocketsConfig{DisableUnix: true})
			if err != nil {
				b.Fatal(err)
			}
			return s, s
		}},
		{"libp2p", func(b *testing.B) (transport.Network, transport.Network) {
			tx, err := NewNetwork(NetworkConfig{})
			if err != nil {
				b.Fatal(err)
			}
			rx, err := NewNetwork(NetworkConfig{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { tx.Close(); rx.Close() })
			return tx, rx
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tx, rx := tc.mk(b)
			ctx := context.Background()
			ln, err := rx.Listen(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			accepted := make(chan net.Conn, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					close(accepted)
					return
				}
				accepted <- c
			}()
			out, err := tx.Dial(ctx, ln.Endpoint())
			if err != nil {
				b.Fatal(err)
			}
			defer out.Close()
			if _, err := out.Write([]byte{0}); err != nil { // libp2p announces a stream with its first bytes
				b.Fatal(err)
			}
			in, ok := <-accepted
			if !ok {
				b.Fatal("accept failed")
			}
			defer in.Close()
			if _, err := io.ReadFull(in, make([]byte, 1)); err != nil {
				b.Fatal(err)
			}
			start, done := make(chan struct{}), make(chan error)
			go func() {
				for range start {
					_, err := io.CopyN(io.Discard, in, size)
					done <- err
				}
			}()
			defer close(start)
			buf := make([]byte, write)
			b.SetBytes(size)
			for b.Loop() {
				start <- struct{}{}
				for sent := 0; sent < size; sent += write {
					if _, err := out.Write(buf); err != nil {
						b.Fatal(err)
					}
				}
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
