package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/elastic"
	"github.com/ringtail-ml/ringtail/elastic/shard/service"
	"github.com/ringtail-ml/ringtail/examples/train"
)

// elasticOptions are the flags --elastic uses.
type elasticOptions struct {
	epochs, batch, perShard int
	lr, momentum            float64
	hidden                  string
	seed                    uint64
	testFrac                float64
	stepCompute             time.Duration
	data                    string
	json                    bool
}

// runElastic is ringtail-train --elastic: one rank of an elastic job
// (examples/train.RunElastic) whose membership, seeds and shard service
// come from the environment `ringtail run --elastic` sets. --batch is the
// global batch at the job's initial size (RINGTAIL_ELASTIC_NP): each rank
// trains batch/np rows a step whatever the job's size later.
func runElastic(ctx context.Context, o elasticOptions, logger zerolog.Logger, stdout, stderr io.Writer) int {
	fail := func(code int, err error) int {
		fmt.Fprintf(stderr, "ringtail-train: %v\n", err)
		return code
	}
	member, err := elastic.ConfigFromEnv()
	if err != nil {
		return fail(2, err)
	}
	addr := os.Getenv(service.EnvAddr)
	if addr == "" {
		return fail(2, fmt.Errorf("--elastic needs the shard service's address in $%s (ringtail run --elastic sets it)", service.EnvAddr))
	}
	np := member.InitialNP
	if np == 0 {
		np = member.MinNP
	}
	layers, err := train.ParseHidden(o.hidden)
	if err != nil {
		return fail(2, fmt.Errorf("--hidden: %w", err))
	}
	if o.batch < 1 {
		return fail(2, fmt.Errorf("--batch %d must be ≥ 1", o.batch))
	}
	all, err := train.LoadDigits(o.data)
	if err != nil {
		return fail(1, err)
	}
	trainSet, testSet, err := all.Split(o.testFrac, o.seed)
	if err != nil {
		return fail(1, err)
	}
	cfg := train.ElasticConfig{
		Member: member, Shards: service.ClientConfig{Addr: addr, Secret: member.Secret},
		Train: trainSet, Test: testSet, Hidden: layers, Epochs: o.epochs, Batch: (o.batch + np - 1) / np,
		BatchesPerShard: o.perShard, LR: o.lr, Momentum: o.momentum, Seed: o.seed, StepCompute: o.stepCompute,
		Out: stdout, Logger: logger,
	}
	if o.json {
		cfg.Out = stderr
	}
	fmt.Fprintf(cfg.Out, "ringtail-train: elastic rank %s (pid %d)  %d rows a step (batch %d at %d ranks)  %d epochs of %d shards\n",
		member.ID, os.Getpid(), cfg.Batch, o.batch, np, o.epochs, cfg.ShardConfig().NumShards())
	rep, err := train.RunElastic(ctx, cfg)
	if err != nil {
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return fail(1, errors.New("interrupted"))
		}
		return fail(train.ExitStatus(err), err)
	}
	if o.json && rep.Finished && rep.Rank == 0 {
		out, err := json.Marshal(rep)
		if err != nil {
			return fail(1, err)
		}
		fmt.Fprintln(stdout, string(out))
	}
	return 0
}
