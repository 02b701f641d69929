package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/ringtail-ml/ringtail/internal/testbed"
	"github.com/ringtail-ml/ringtail/internal/testbed/control"
)

func main() { os.Exit(run()) }

func run() int {
	fs := flag.NewFlagSet("testbed", flag.ContinueOnError)
	hosts := fs.Int("hosts", 4, "number of host namespaces")
	subnet := fs.String("subnet", testbed.DefaultSubnet.String(), "the hosts' IPv4 `subnet` (hosts .1, .2, ...; the hub the last address)")
	links := fs.String("links", "", "link clauses of the injection language, e.g. 'link=3:rate=50mbit;link=2:delay=20ms' (rank r = host r)")
	sweep := fs.Bool("sweep", false, "only remove the beds of processes that are gone, and exit")
	flip := fs.String("flip", "", "`HOST:BYTES`: flip one bit of the byte BYTES bytes into the first ringtail data-plane connection through HOST's link (Bed.Flip)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 2
	}
	ctx := context.Background()
	if *sweep {
		gone, err := testbed.Sweep(ctx)
		for _, n := range gone {
			fmt.Fprintf(os.Stderr, "testbed: removed stale namespace %s\n", n)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "testbed: no command given: testbed [flags] -- CMD ARGS...")
		return 2
	}
	prefix, err := netip.ParsePrefix(*subnet)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testbed: --subnet: %v\n", err)
		return 2
	}
	spec, err := testbed.ParseLinks(*links, *hosts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testbed: --links: %v\n", err)
		return 2
	}
	if why := testbed.Missing(len(spec.Links) > 0); why != "" {
		fmt.Fprintf(os.Stderr, "testbed: %s\n", why)
		return 1
	}
	// Signals: stop listening only after the bed is gone.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	bed, err := testbed.New(ctx, testbed.Config{Hosts: *hosts, Subnet: prefix})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := bed.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "testbed: removing the bed: %v\n", err)
		}
	}()
	shaper := testbed.NewShaper(bed, *hosts, func(r int) int { return r })
	defer shaper.Stop()
	if err := shaper.SetLinks(ctx, *links); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if *flip != "" {
		if err := armFlip(ctx, bed, *flip); err != nil {
			fmt.Fprintf(os.Stderr, "testbed: --flip: %v\n", err)
			return 2
		}
	}
	// The control socket: the command (its ranks, through ringtail run -x
	// TB_CONTROL) reshapes the links and stalls them while the bed stands.
	ctlDir, err := os.MkdirTemp("", "testbed-control")
	if err != nil {
		fmt.Fprintf(os.Stderr, "testbed: %v\n", err)
		return 1
	}
	defer os.RemoveAll(ctlDir)
	ctlPath := filepath.Join(ctlDir, "control.sock")
	ctlLn, err := net.Listen("unix", ctlPath)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testbed: control socket: %v\n", err)
		return 1
	}
	ctlCtx, stopCtl := context.WithCancel(ctx)
	ctlDone := make(chan error, 1)
	go func() { ctlDone <- control.Serve(ctlCtx, ctlLn, shaper) }()
	defer func() {
		stopCtl()
		if err := <-ctlDone; err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()

	var names, addrs []string
	for _, h := range bed.Hosts() {
		names, addrs = append(names, h.Name), append(addrs, h.Addr.String())
	}
	cmd := exec.Command(fs.Arg(0), fs.Args()[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// If this tool dies (SIGKILL), CMD gets SIGTERM; the parent-death
	// signal follows the thread that forks, so it stays locked.
	runtime.LockOSThread()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	cmd.Env = append(os.Environ(), "TB_HUB="+bed.HubName(), "TB_HUB_ADDR="+bed.HubAddr().String(),
		"TB_HOSTS="+strings.Join(names, " "), "TB_ADDRS="+strings.Join(addrs, " "), "TB_HOSTLIST="+bed.HostList(1), control.EnvSocket+"="+ctlPath)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "testbed: %v\n", err)
		return 127
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				_ = cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	err = cmd.Wait()
	close(done)
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				return 128 + int(ws.Signal())
			}
			return ee.ExitCode()
		}
		fmt.Fprintf(os.Stderr, "testbed: %v\n", err)
		return 1
	}
	return 0
}

// armFlip routes host h's link through the proxy (keeping its shape) and
// arms a flip of the byte n bytes into the first data-plane connection
// through it; spec is "h:n". A line on stderr says when it happened.
func armFlip(ctx context.Context, bed *testbed.Bed, spec string) error {
	hs, ns, ok := strings.Cut(spec, ":")
	h, err1 := strconv.Atoi(hs)
	n, err2 := strconv.ParseInt(ns, 10, 64)
	if !ok || err1 != nil || err2 != nil || h < 0 || h >= len(bed.Hosts()) {
		return fmt.Errorf("%q: want HOST:BYTES with a host of the bed", spec)
	}
	l := bed.Link(h)
	l.Proxy = true
	if err := bed.SetLink(ctx, h, l); err != nil {
		return err
	}
	done, err := bed.Flip(h, n)
	if err != nil {
		return err
	}
	go func() {
		<-done
		fmt.Fprintf(os.Stderr, "testbed: flipped a byte %d bytes into a data-plane connection through host %d\n", n, h)
	}()
	return nil
}
