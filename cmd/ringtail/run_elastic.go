package main

import (
	"context"
	"io"
	"os"
	"strings"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/elastic/job"
	"github.com/ringtail-ml/ringtail/internal/launch"
	"github.com/ringtail-ml/ringtail/internal/logging"
)

// launchElastic runs `ringtail run --elastic` (elastic/job) with cfg, the
// --env and -x pairs added to every rank's environment and the
// launcher's log on stderr.
func launchElastic(ctx context.Context, cfg job.Config, envs, exports []string, verbose bool, stderr io.Writer) int {
	usageErr := func(msg string) int {
		io.WriteString(stderr, "ringtail run: "+msg+"\n")
		return launch.ExitUsage
	}
	cfg.Env = append(cfg.Env, envs...)
	for _, x := range exports {
		if strings.Contains(x, "=") {
			cfg.Env = append(cfg.Env, x)
			continue
		}
		v, ok := os.LookupEnv(x)
		if !ok {
			return usageErr("-x " + x + ": not set in this environment")
		}
		cfg.Env = append(cfg.Env, x+"="+v)
	}
	errw := zerolog.SyncWriter(stderr)
	logger, logFormat, err := logging.ForJob(os.LookupEnv, errw, logging.IsTerminal(stderr), verbose)
	if err != nil {
		return usageErr(err.Error())
	}
	cfg.Logger, cfg.Stderr = logger, errw
	// --env and -x may override the format.
	cfg.Env = append([]string{logFormat}, cfg.Env...)
	code, _ := job.Run(ctx, cfg) // Run has written its failure to stderr
	return code
}
