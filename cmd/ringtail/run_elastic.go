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
	logOpts, err := logging.OptionsFromLookup(os.LookupEnv)
	if err != nil {
		return usageErr(err.Error())
	}
	if verbose && logOpts.Level > zerolog.DebugLevel {
		logOpts.Level = zerolog.DebugLevel
	}
	logOpts.Out, logOpts.Terminal = errw, logging.IsTerminal(stderr)
	cfg.Logger = logging.New(logOpts)
	cfg.Stderr = errw
	if _, set := os.LookupEnv(logging.EnvFormat); logOpts.Terminal && !set {
		cfg.Env = append(cfg.Env, logging.EnvFormat+"="+string(logging.FormatConsole))
	}
	code, _ := job.Run(ctx, cfg) // Run has written its failure to stderr
	return code
}
