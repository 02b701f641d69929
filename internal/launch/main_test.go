//go:build linux

package launch_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ringtail-ml/ringtail"
)

// helperArg as the first argument makes the test binary a rank (see
// helper) instead of running the tests: the tests launch it as
// []string{os.Args[0], helperArg, mode, ...}.
const helperArg = "launch-test-helper"

func TestMain(m *testing.M) {
	if os.Getenv(fakeSrunVar) != "" {
		os.Exit(fakeSrun(os.Args[1:]))
	}
	if len(os.Args) > 2 && os.Args[1] == helperArg {
		os.Exit(helper(os.Args[2], os.Args[3:]))
	}
	os.Exit(m.Run())
}

// helper is one rank. Modes:
//
//	env                print the contract variables on one stdout line, one line on stderr
//	fail R CODE        rank R exits CODE once the others are ready; they block
//	ignoreterm R CODE  as fail, but the others ignore SIGTERM
//	killself R         rank R kills itself with SIGKILL once the others are ready
//	diefirst R         rank R kills itself with SIGKILL; the others exit 1 once it has ended
//	block              every rank blocks (after saying it is ready)
//	spawn              start a blocking grandchild that shares stdout, then exit 0
//	lines N            write N long lines to stdout and stderr in small pieces
//	allreduce          join the job with ringtail.New and all-reduce rank+1
//	absent R           rank R blocks without joining; the others join as allreduce
//
// "Ready" is a file ready-RANK in $LAUNCH_READY_DIR.
func helper(mode string, args []string) int {
	rank, _ := strconv.Atoi(os.Getenv("RANK"))
	world, _ := strconv.Atoi(os.Getenv("WORLD_SIZE"))
	argInt := func(i int) int { n, _ := strconv.Atoi(args[i]); return n }
	switch mode {
	case "env":
		wd, _ := os.Getwd()
		// ringtail's coordinator: RINGTAIL_MASTER_* when the launcher
		// left MASTER_* to torch (rank 0 local), else MASTER_*.
		addr, port := os.Getenv("RINGTAIL_MASTER_ADDR"), os.Getenv("RINGTAIL_MASTER_PORT")
		if addr == "" {
			addr, port = os.Getenv("MASTER_ADDR"), os.Getenv("MASTER_PORT")
		}
		fmt.Printf("rank=%s world=%s local=%s/%s master=%s:%s torch=%s:%s job=%s coord=%s timeout=%s secret=%s extra=%s localonly=%s dir=%s\n",
			os.Getenv("RANK"), os.Getenv("WORLD_SIZE"), os.Getenv("LOCAL_RANK"), os.Getenv("LOCAL_WORLD_SIZE"),
			addr, port, os.Getenv("MASTER_ADDR"), os.Getenv("MASTER_PORT"), os.Getenv("RINGTAIL_JOB_ID"), os.Getenv("RINGTAIL_COORDINATOR"),
			os.Getenv("RINGTAIL_TIMEOUT"), os.Getenv("RINGTAIL_SECRET"), os.Getenv("LAUNCH_EXTRA"), os.Getenv("LAUNCH_LOCAL_ONLY"), wd)
		fmt.Fprintf(os.Stderr, "stderr of %d\n", rank)
		return 0
	case "fail", "ignoreterm", "killself":
		if rank == argInt(0) {
			waitReady(world - 1)
			if mode == "killself" {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
			return argInt(1)
		}
		if mode == "ignoreterm" {
			signal.Ignore(syscall.SIGTERM)
		}
		markReady(rank)
		select {}
	case "diefirst":
		// A kill -9 seen by its peers: rank R kills itself once the
		// others watch it; each of them exits 1 as soon as R has ended
		// (a pidfd is readable once the process is a zombie), like a
		// rank whose collective failed because R died.
		dir := os.Getenv("LAUNCH_READY_DIR")
		pidFile := filepath.Join(dir, "pid-"+args[0])
		if rank == argInt(0) {
			os.WriteFile(pidFile+".tmp", []byte(strconv.Itoa(os.Getpid())), 0o644)
			os.Rename(pidFile+".tmp", pidFile)
			waitReady(world - 1)
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		waitReadyName("pid-" + args[0])
		b, _ := os.ReadFile(pidFile)
		pid, _ := strconv.Atoi(string(b))
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, "pidfd_open:", err)
			return 2
		}
		markReady(rank)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fds, -1); err != unix.EINTR {
				break
			}
		}
		return 1
	case "block":
		markReady(rank)
		select {}
	case "spawn":
		c := exec.Command(os.Args[0], helperArg, "block")
		c.Env = append(os.Environ(), "RANK=1000"+strconv.Itoa(rank))
		c.Stdout = os.Stdout
		if err := c.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		waitReadyName("ready-1000" + strconv.Itoa(rank))
		fmt.Println("spawned")
		return 0
	case "lines":
		n := argInt(0)
		for i := range n {
			line := fmt.Appendf(nil, "%d:%d:%0*d\n", rank, i, 1000+i, 0)
			for len(line) > 0 {
				k := min(len(line), 333)
				os.Stdout.Write(line[:k])
				os.Stderr.Write(line[:k])
				line = line[k:]
			}
		}
		return 0
	case "absent":
		if rank == argInt(0) {
			select {}
		}
		fallthrough
	case "allreduce":
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cfg, err := ringtail.ConfigFromEnv()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		comm, err := ringtail.New(ctx, cfg)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer comm.Close()
		buf := []float32{float32(comm.Rank() + 1)} // the rank the runtime found, RANK or not
		if err := comm.AllReduce(ctx, ringtail.Float32s(buf), ringtail.Sum); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Printf("sum=%g\n", buf[0])
		return 0
	}
	fmt.Fprintf(os.Stderr, "unknown helper mode %q\n", mode)
	return 99
}

func markReady(rank int) {
	os.WriteFile(filepath.Join(os.Getenv("LAUNCH_READY_DIR"), "ready-"+strconv.Itoa(rank)), nil, 0o644)
}

// waitReadyName waits (at most a minute) until the file name is there.
func waitReadyName(name string) {
	for range 6000 {
		if _, err := os.Stat(filepath.Join(os.Getenv("LAUNCH_READY_DIR"), name)); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitReady waits (at most a minute) until n ranks are ready.
func waitReady(n int) {
	for range 6000 {
		m, _ := filepath.Glob(filepath.Join(os.Getenv("LAUNCH_READY_DIR"), "ready-*"))
		if len(m) >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
