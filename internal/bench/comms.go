package bench

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/ringtail-ml/ringtail"
)

// ErrUsage is wrapped by Comms' errors that are the caller's mistake (a
// bad environment or -np), as opposed to a job that could not form.
var ErrUsage = errors.New("usage")

// Comms joins the job a bench program runs in: when a launcher started
// this process (RANK set), its one communicator from the
// environment; otherwise np in-process ranks (at least 2), each configured
// by local. The caller closes every communicator returned.
func Comms(ctx context.Context, np int, local func(*ringtail.Config)) ([]*ringtail.Comm, error) {
	if _, launched := os.LookupEnv(ringtail.EnvRank); launched {
		cfg, err := ringtail.ConfigFromEnv()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUsage, err)
		}
		c, err := ringtail.New(ctx, cfg)
		if err != nil {
			return nil, err
		}
		return []*ringtail.Comm{c}, nil
	}
	if np < 2 {
		return nil, fmt.Errorf("%w: -np must be at least 2", ErrUsage)
	}
	return ringtail.NewLocal(ctx, np, local)
}
