package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ringtail-ml/ringtail/internal/bench"
)

type result struct {
	Stream    string  `json:"stream"`
	SizeBytes int64   `json:"size_bytes"`
	Iters     int     `json:"iters"`
	TimeUS    float64 `json:"time_us"`
	GBps      float64 `json:"gbps"`
}

// listen opens a loopback listener of the given kind.
func listen(kind string) (net.Listener, func(), error) {
	switch kind {
	case "tcp":
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		return ln, func() {}, err
	case "unix":
		dir, err := os.MkdirTemp("", "rawstream")
		if err != nil {
			return nil, nil, err
		}
		ln, err := net.Listen("unix", filepath.Join(dir, "s"))
		return ln, func() { os.RemoveAll(dir) }, err
	}
	return nil, nil, fmt.Errorf("-net must be tcp or unix, not %q", kind)
}

func run(kind string, size int64, iters, warmup int) (result, error) {
	ln, cleanup, err := listen(kind)
	if err != nil {
		return result{}, err
	}
	defer cleanup()
	defer ln.Close()

	recvErr := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			recvErr <- err
			return
		}
		defer c.Close()
		buf := make([]byte, size)
		ack := []byte{1}
		for i := 0; i < warmup+iters; i++ {
			if _, err := io.ReadFull(c, buf); err != nil {
				recvErr <- err
				return
			}
			if _, err := c.Write(ack); err != nil {
				recvErr <- err
				return
			}
		}
		recvErr <- nil
	}()

	c, err := net.Dial(ln.Addr().Network(), ln.Addr().String())
	if err != nil {
		return result{}, err
	}
	defer c.Close()
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = byte(i)
	}
	ack := make([]byte, 1)
	transfer := func() error {
		if _, err := c.Write(buf); err != nil {
			return err
		}
		_, err := io.ReadFull(c, ack)
		return err
	}
	for i := 0; i < warmup; i++ {
		if err := transfer(); err != nil {
			return result{}, err
		}
	}
	start := time.Now()
	for i := 0; i < iters; i++ {
		if err := transfer(); err != nil {
			return result{}, err
		}
	}
	avg := time.Since(start).Seconds() / float64(iters)
	if err := <-recvErr; err != nil {
		return result{}, err
	}
	return result{Stream: kind, SizeBytes: size, Iters: iters, TimeUS: avg * 1e6, GBps: float64(size) / avg / 1e9}, nil
}

// serve receives one sender's transfers on addr, acking each.
func serve(addr string, size int64, iters, warmup int) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	c, err := ln.Accept()
	if err != nil {
		return err
	}
	defer c.Close()
	buf := make([]byte, size)
	for i := 0; i < warmup+iters; i++ {
		if _, err := io.ReadFull(c, buf); err != nil {
			return err
		}
		if _, err := c.Write([]byte{1}); err != nil {
			return err
		}
	}
	return nil
}

// send times transfers to a receiver at addr, retrying the connection
// for up to 30 s while the receiver starts.
func send(addr string, size int64, iters, warmup int) (result, error) {
	var c net.Conn
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; {
		if c, err = net.Dial("tcp", addr); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return result{}, err
	}
	defer c.Close()
	buf := make([]byte, size)
	ack := make([]byte, 1)
	transfer := func() error {
		if _, err := c.Write(buf); err != nil {
			return err
		}
		_, err := io.ReadFull(c, ack)
		return err
	}
	for i := 0; i < warmup; i++ {
		if err := transfer(); err != nil {
			return result{}, err
		}
	}
	start := time.Now()
	for i := 0; i < iters; i++ {
		if err := transfer(); err != nil {
			return result{}, err
		}
	}
	avg := time.Since(start).Seconds() / float64(iters)
	return result{Stream: "tcp->" + addr, SizeBytes: size, Iters: iters, TimeUS: avg * 1e6, GBps: float64(size) / avg / 1e9}, nil
}

func main() {
	serveAddr := flag.String("serve", "", "receive one sender's transfers on this TCP `address` and exit")
	sendAddr := flag.String("send", "", "time transfers to a receiver (-serve) at this TCP `address`")
	kinds := flag.String("net", "unix", "socket kinds to measure, comma-separated: tcp, unix")
	sizeS := flag.String("size", "64M", "bytes per transfer (K, M, G suffixes are binary)")
	iters := flag.Int("iters", 10, "timed transfers")
	warmup := flag.Int("warmup", 2, "untimed transfers")
	asJSON := flag.Bool("json", false, "print one JSON object per socket kind")
	flag.Parse()
	size, err := bench.ParseSize(*sizeS)
	if err != nil || size <= 0 || *iters < 1 || *warmup < 0 {
		fmt.Fprintln(os.Stderr, "rawstream: need a positive -size and -iters")
		os.Exit(2)
	}
	switch {
	case *serveAddr != "":
		if err := serve(*serveAddr, size, *iters, *warmup); err != nil {
			fmt.Fprintf(os.Stderr, "rawstream -serve: %v\n", err)
			os.Exit(1)
		}
		return
	case *sendAddr != "":
		r, err := send(*sendAddr, size, *iters, *warmup)
		if err != nil {
			fmt.Fprintf(os.Stderr, "rawstream -send: %v\n", err)
			os.Exit(1)
		}
		if *asJSON {
			b, _ := json.Marshal(r)
			fmt.Println(string(b))
		} else {
			fmt.Printf("%-5s %12d bytes  %10.1f us  %7.3f GB/s\n", r.Stream, r.SizeBytes, r.TimeUS, r.GBps)
		}
		return
	}
	for _, kind := range strings.Split(*kinds, ",") {
		r, err := run(strings.TrimSpace(kind), size, *iters, *warmup)
		if err != nil {
			fmt.Fprintf(os.Stderr, "rawstream %s: %v\n", kind, err)
			os.Exit(1)
		}
		if *asJSON {
			b, _ := json.Marshal(r)
			fmt.Println(string(b))
		} else {
			fmt.Printf("%-5s %12d bytes  %10.1f us  %7.3f GB/s\n", r.Stream, r.SizeBytes, r.TimeUS, r.GBps)
		}
	}
}
