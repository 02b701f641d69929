package main

import (
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ringtail-ml/ringtail"
)

// parseOverrides splits newline-separated NAME=VALUE lines. Blank lines are
// skipped; a line without '=' or a repeated name is an error.
func parseOverrides(s string) (map[string]string, error) {
	out := map[string]string{}
	for i, line := range strings.Split(s, "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, fmt.Errorf("override line %d %q is not NAME=VALUE", i+1, line)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("override %s given twice", name)
		}
		out[name] = value
	}
	return out, nil
}

// configFromEnv returns ringtail.ConfigFromEnv with the overrides applied,
// parsed by the same rules. Unknown names are an error, so a typo is not
// silently ignored. When MASTER_ADDR or MASTER_PORT is overridden and no
// job id is given (by override or environment), the job id is derived
// again from the new address, as ConfigFromEnv would have.
func configFromEnv(overrides string) (ringtail.Config, error) {
	cfg, err := ringtail.ConfigFromEnv()
	if err != nil {
		return cfg, fmt.Errorf("capi: %w", err)
	}
	kv, err := parseOverrides(overrides)
	if err != nil {
		return cfg, fmt.Errorf("capi: %w", err)
	}
	var errs []string
	atoi := func(name, v string, dst *int) {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s=%q is not an integer", name, v))
			return
		}
		*dst = n
	}
	dur := func(name, v string, dst *time.Duration) {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s=%q is not a duration (e.g. 30s, 5m)", name, v))
			return
		}
		*dst = d
	}
	flag := func(v string) bool {
		return v == "1" || strings.EqualFold(v, "true") || strings.EqualFold(v, "yes")
	}
	// Sorted, so errors come out in a stable order.
	names := make([]string, 0, len(kv))
	for k := range kv {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, name := range names {
		v := kv[name]
		switch name {
		case ringtail.EnvRank:
			atoi(name, v, &cfg.Rank)
		case ringtail.EnvWorldSize:
			atoi(name, v, &cfg.WorldSize)
		case ringtail.EnvLocalRank:
			atoi(name, v, &cfg.LocalRank)
		case ringtail.EnvLocalWorldSize:
			atoi(name, v, &cfg.LocalWorldSize)
		case ringtail.EnvMasterAddr:
			cfg.MasterAddr = v
		case ringtail.EnvMasterPort:
			atoi(name, v, &cfg.MasterPort)
		case ringtail.EnvSecret:
			cfg.Secret = []byte(v)
		case ringtail.EnvSecretFile:
			b, err := os.ReadFile(v)
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s: %v", name, err))
			}
			cfg.Secret = []byte(strings.TrimSpace(string(b)))
		case ringtail.EnvInsecure:
			cfg.Insecure = flag(v)
		case ringtail.EnvJobID:
			cfg.JobID = v
		case ringtail.EnvCoordinator:
			cfg.ExternalCoordinator = v == "external"
		case ringtail.EnvListenIP:
			cfg.ListenIP = v
		case ringtail.EnvNoUnix:
			cfg.DisableUnix = flag(v)
		case ringtail.EnvNoShm:
			cfg.DisableShm = flag(v)
		case ringtail.EnvTimeout:
			dur(name, v, &cfg.OpTimeout)
		case ringtail.EnvPeerTimeout:
			dur(name, v, &cfg.PeerTimeout)
		case ringtail.EnvConnectTimeout:
			dur(name, v, &cfg.ConnectTimeout)
		case ringtail.EnvChannels:
			atoi(name, v, &cfg.Channels)
		case ringtail.EnvChunkBytes:
			atoi(name, v, &cfg.ChunkBytes)
		case ringtail.EnvSmallBytes:
			atoi(name, v, &cfg.SmallBytes)
		default:
			errs = append(errs, fmt.Sprintf("unknown override %s", name))
		}
	}
	_, addrOver := kv[ringtail.EnvMasterAddr]
	_, portOver := kv[ringtail.EnvMasterPort]
	_, jobOver := kv[ringtail.EnvJobID]
	if (addrOver || portOver) && !jobOver && os.Getenv(ringtail.EnvJobID) == "" && cfg.MasterPort != 0 {
		cfg.JobID = "job@" + net.JoinHostPort(cfg.MasterAddr, strconv.Itoa(cfg.MasterPort))
	}
	if len(errs) > 0 {
		return cfg, fmt.Errorf("capi: overrides: %s", strings.Join(errs, "; "))
	}
	return cfg, nil
}
