//go:build cgo

package main

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/internal/envcfg"
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

// configFromEnv returns the configuration ringtail.ConfigFromEnv would
// read with the overrides set in the environment, parsed by the same code
// (ringtail.ConfigFromLookup). A name the configuration never asks for is
// an error, so a typo is not silently ignored. Overriding MASTER_ADDR or
// MASTER_PORT without a job id derives the job id from the new address,
// as for the environment.
func configFromEnv(overrides string) (ringtail.Config, error) {
	kv, err := parseOverrides(overrides)
	if err != nil {
		return ringtail.Config{}, fmt.Errorf("capi: %w", err)
	}
	asked := map[string]bool{}
	lookup := func(name string) (string, bool) {
		asked[name] = true
		if v, ok := kv[name]; ok {
			return v, true
		}
		return os.LookupEnv(name)
	}
	// The configuration's logger (RINGTAIL_LOG_LEVEL, default warn, so
	// refused peers show) writes to stderr: the C API's callers, the
	// PyTorch backend included, set none of their own.
	cfg, err := ringtail.ConfigFromLookup(lookup)
	if cfg.LocalRank == 0 { // a misspelt RINGTAIL_* name of the process's environment: one warning each, once a host
		envcfg.WarnUnknown(cfg.Logger, os.Environ())
	}
	errs := []error{err} // nil is skipped by errors.Join
	for _, name := range slices.Sorted(maps.Keys(kv)) {
		if !asked[name] {
			errs = append(errs, fmt.Errorf("unknown override %s", name))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return cfg, fmt.Errorf("capi: overrides: %w", err)
	}
	return cfg, nil
}
