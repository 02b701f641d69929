package shard

import "fmt"

// MaxWorkerIDLen bounds worker identifiers (they travel on the wire and
// in the log).
const MaxWorkerIDLen = 256

// Config describes how an epoch is cut into shards. It is part of the
// persisted state: a store refuses to reopen with a different Config.
type Config struct {
	// Samples is N, the number of samples per epoch (indices 0..N−1).
	Samples int64 `json:"samples"`
	// BatchSize is B, the global batch size.
	BatchSize int64 `json:"batch_size"`
	// BatchesPerShard is M, batches per shard (AntDT uses 100). Shards then
	// hold B·M samples and K = ⌈N/(B·M)⌉.
	BatchesPerShard int64 `json:"batches_per_shard"`
	// ShardSize, if positive, sets the samples per shard directly and
	// overrides BatchSize·BatchesPerShard.
	ShardSize int64 `json:"shard_size,omitempty"`
	// Epochs is how many passes over the data the job makes (≥ 1).
	Epochs int `json:"epochs"`
	// Shuffle shuffles the shard order every epoch and the samples inside
	// every shard; false keeps both in index order.
	Shuffle bool `json:"shuffle"`
	// Seed drives both shuffles.
	Seed uint64 `json:"seed"`
}

// Validate reports an unusable configuration (wrapping ErrInvalidConfig).
func (c Config) Validate() error {
	switch {
	case c.Samples <= 0:
		return fmt.Errorf("%w: samples %d must be positive", ErrInvalidConfig, c.Samples)
	case c.Epochs < 1:
		return fmt.Errorf("%w: epochs %d must be ≥ 1", ErrInvalidConfig, c.Epochs)
	case c.ShardSize < 0:
		return fmt.Errorf("%w: shard size %d is negative", ErrInvalidConfig, c.ShardSize)
	case c.ShardSize == 0 && (c.BatchSize <= 0 || c.BatchesPerShard <= 0):
		return fmt.Errorf("%w: need a shard size or a positive batch size (%d) and batches per shard (%d)", ErrInvalidConfig, c.BatchSize, c.BatchesPerShard)
	case c.ShardSize == 0 && c.BatchSize > (1<<62)/c.BatchesPerShard:
		return fmt.Errorf("%w: batch size × batches per shard overflows", ErrInvalidConfig)
	}
	if k := c.NumShards(); k > 1<<31 {
		return fmt.Errorf("%w: %d shards per epoch is too many", ErrInvalidConfig, k)
	}
	return nil
}

// ShardLen returns the samples per shard (the last shard may be shorter).
func (c Config) ShardLen() int64 {
	if c.ShardSize > 0 {
		return c.ShardSize
	}
	return c.BatchSize * c.BatchesPerShard
}

// NumShards returns K = ⌈N / ShardLen⌉, the shards per epoch.
func (c Config) NumShards() int64 {
	l := c.ShardLen()
	return (c.Samples + l - 1) / l
}
