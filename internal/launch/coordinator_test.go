package launch_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"
	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/internal/launch"
	"github.com/ringtail-ml/ringtail/internal/p2p"
)

// startCoordinator runs ServeCoordinator until the test ends and returns
// its TCP port and job id.
func startCoordinator(t *testing.T, cfg launch.CoordinatorConfig) (int, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	type ready struct {
		addr  net.Addr
		jobID string
	}
	readyc := make(chan ready, 1)
	cfg.Ready = func(a net.Addr, id string) { readyc <- ready{a, id} }
	done := make(chan error, 1)
	go func() { done <- launch.ServeCoordinator(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeCoordinator after cancel: %v", err)
		}
	})
	select {
	case r := <-readyc:
		return portOf(t, r.addr), r.jobID
	case err := <-done:
		done <- err // for the cleanup
		t.Fatalf("ServeCoordinator: %v", err)
	}
	return 0, ""
}

// portOf returns the TCP port of a coordinator's address: a TCP one, or a
// libp2p multiaddress.
func portOf(t *testing.T, a net.Addr) int {
	t.Helper()
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.Port
	}
	pa, ok := a.(p2p.Addr)
	if !ok {
		t.Fatalf("coordinator address %v (%T)", a, a)
	}
	v, err := pa.Multiaddr.ValueForProtocol(ma.P_TCP)
	if err != nil {
		t.Fatalf("coordinator address %v: %v", a, err)
	}
	port, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("coordinator address %v: %v", a, err)
	}
	return port
}

// rankConfig is what a rank started by torchrun or Slurm would read from
// its environment, for a coordinator at port.
func rankConfig(rank, world, port int, secret, jobID string) ringtail.Config {
	c := ringtail.DefaultConfig(rank, world)
	c.MasterAddr, c.MasterPort, c.ExternalCoordinator = "127.0.0.1", port, true
	c.Secret, c.JobID = []byte(secret), jobID
	c.ConnectTimeout = 20 * time.Second
	return c
}

func TestServeCoordinatorServesTwoRanksInProcess(t *testing.T) {
	port, jobID := startCoordinator(t, launch.CoordinatorConfig{
		Listen: "127.0.0.1:0", World: 2, Secret: []byte("sixteen-byte-key"), Logger: zerolog.New(zerolog.NewTestWriter(t)),
	})
	// Without a job id the coordinator derives the one the ranks derive
	// from MASTER_ADDR:MASTER_PORT when RINGTAIL_JOB_ID is unset.
	if want := launch.DerivedJobID("127.0.0.1", port); jobID != want {
		t.Fatalf("job id %q, want %q", jobID, want)
	}
	t.Setenv("MASTER_ADDR", "127.0.0.1")
	t.Setenv("MASTER_PORT", strconv.Itoa(port))
	t.Setenv("RINGTAIL_JOB_ID", "")
	fromEnv, err := ringtail.ConfigFromEnv()
	if err != nil || fromEnv.JobID != jobID {
		t.Fatalf("the runtime derives job id %q (%v), the coordinator %q", fromEnv.JobID, err, jobID)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	sums := make([]float32, 2)
	errs := make([]error, 2)
	for r := range 2 {
		wg.Go(func() {
			comm, err := ringtail.New(ctx, rankConfig(r, 2, port, "sixteen-byte-key", jobID))
			if err != nil {
				errs[r] = err
				return
			}
			defer comm.Close()
			buf := []float32{float32(r + 1)}
			errs[r] = comm.AllReduce(ctx, ringtail.Float32s(buf), ringtail.Sum)
			sums[r] = buf[0]
		})
	}
	wg.Wait()
	for r := range 2 {
		if errs[r] != nil || sums[r] != 3 {
			t.Fatalf("rank %d: sum %v, %v", r, sums[r], errs[r])
		}
	}
}

func TestServeCoordinatorRefusesAWrongSecret(t *testing.T) {
	port, _ := startCoordinator(t, launch.CoordinatorConfig{Listen: "127.0.0.1:0", World: 2, Secret: []byte("the-right-secret"), JobID: "j"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := ringtail.New(ctx, rankConfig(0, 2, port, "the-wrong-secret", "j"))
	if err == nil || !strings.Contains(err.Error(), "wrong job secret") {
		t.Fatalf("New with a wrong secret: %v", err)
	}
}

func TestCoordinatorConfigValidate(t *testing.T) {
	ok := launch.CoordinatorConfig{Listen: "10.0.0.1:29500", World: 2, Secret: []byte("sixteen-byte-key")}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		edit func(*launch.CoordinatorConfig)
		want string
	}{
		{func(c *launch.CoordinatorConfig) { c.Listen = ":29500" }, "give a job id"},
		{func(c *launch.CoordinatorConfig) { c.Listen = "0.0.0.0:29500" }, "give a job id"},
		{func(c *launch.CoordinatorConfig) { c.Listen = "host" }, "missing port"},
		{func(c *launch.CoordinatorConfig) { c.Listen = "host:http" }, "0..65535"},
		{func(c *launch.CoordinatorConfig) { c.World = 0 }, "world size"},
		{func(c *launch.CoordinatorConfig) { c.Secret = nil }, "secret is empty"},
	} {
		c := ok
		tc.edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want mention of %q", c, err, tc.want)
		}
	}
	c := ok
	c.Listen, c.JobID = ":0", "j"
	if err := c.Validate(); err != nil {
		t.Fatalf("wildcard listen with a job id: %v", err)
	}
}

func TestEnvNamesMatchTheRuntime(t *testing.T) {
	for got, want := range map[string]string{
		launch.EnvRank: ringtail.EnvRank, launch.EnvWorldSize: ringtail.EnvWorldSize,
		launch.EnvLocalRank: ringtail.EnvLocalRank, launch.EnvLocalWorldSize: ringtail.EnvLocalWorldSize,
		launch.EnvMasterAddr: ringtail.EnvMasterAddr, launch.EnvMasterPort: ringtail.EnvMasterPort,
		launch.EnvSecret: ringtail.EnvSecret, launch.EnvSecretFile: ringtail.EnvSecretFile,
		launch.EnvJobID: ringtail.EnvJobID, launch.EnvCoordinator: ringtail.EnvCoordinator,
		launch.EnvTimeout: ringtail.EnvTimeout,
	} {
		if got != want {
			t.Errorf("launch names %q where the runtime reads %q", got, want)
		}
	}
	t.Setenv(ringtail.EnvCoordinator, launch.CoordinatorExternal)
	if c, _ := ringtail.ConfigFromEnv(); !c.ExternalCoordinator {
		t.Errorf("%s=%s does not make the runtime's coordinator external", ringtail.EnvCoordinator, launch.CoordinatorExternal)
	}
}
