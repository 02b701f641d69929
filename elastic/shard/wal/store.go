package wal

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/elastic/shard"
	"github.com/ringtail-ml/ringtail/internal/fsperm"
)

// File names inside a store directory.
const (
	LogFile      = "shards.wal"
	SnapshotFile = "shards.snapshot"
)

// ErrConfigMismatch means the directory holds a job with another
// shard.Config.
var ErrConfigMismatch = errors.New("wal: store holds a different shard config")

// ErrCorrupt means the snapshot is unreadable or a logged command no
// longer applies: the directory cannot be trusted.
var ErrCorrupt = errors.New("wal: corrupt store")

// ErrFailed is returned by every Store call after a write or fsync of the
// log failed: memory may then be ahead of disk, so the store stops
// accepting commands and the owner must restart from the directory.
var ErrFailed = errors.New("wal: store failed")

// Options configures a Store.
type Options struct {
	// SnapshotEvery is how many logged records trigger a snapshot and log
	// truncation (0 means 1000).
	SnapshotEvery int
	// Logger receives recovery and snapshot messages.
	Logger zerolog.Logger
}

// Validate reports unusable options.
func (o Options) Validate() error {
	if o.SnapshotEvery < 0 {
		return fmt.Errorf("wal: snapshot interval %d is negative", o.SnapshotEvery)
	}
	return nil
}

// record is one log entry: the command and its sequence number.
type record struct {
	Seq uint64 `json:"seq"`
	shard.Command
}

// snapshotFile is the snapshot payload.
type snapshotFile struct {
	// Seq is the last log sequence number the snapshot includes.
	Seq   uint64         `json:"seq"`
	Queue shard.Snapshot `json:"queue"`
}

// Store is a shard.Queue with a write-ahead log and snapshots in a
// directory. It is not safe for concurrent use: one owner (the service's
// loop) calls it.
type Store struct {
	dir       string
	opts      Options
	log       zerolog.Logger
	q         *shard.Queue
	f         *os.File
	seq       uint64
	sinceSnap int
	failed    error
	buf       []byte
}

// Open opens or creates the store in dir for a job with config cfg,
// restoring the snapshot and replaying the log.
func Open(dir string, cfg shard.Config, opts Options) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.SnapshotEvery == 0 {
		opts.SnapshotEvery = 1000
	}
	if err := fsperm.MkdirAll(dir); err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	s := &Store{dir: dir, opts: opts, log: opts.Logger.With().Str("component", "shard-wal").Str("dir", dir).Logger()}
	if err := s.loadSnapshot(cfg); err != nil {
		return nil, err
	}
	if err := s.replay(); err != nil {
		if s.f != nil {
			s.f.Close()
		}
		return nil, err
	}
	return s, nil
}

func (s *Store) loadSnapshot(cfg shard.Config) error {
	b, err := os.ReadFile(filepath.Join(s.dir, SnapshotFile))
	if errors.Is(err, os.ErrNotExist) {
		s.q, err = shard.NewQueue(cfg)
		return err
	}
	if err != nil {
		return fmt.Errorf("wal: read snapshot: %w", err)
	}
	p, n, err := readFrame(b, maxSnapshotLen)
	if err != nil || n != len(b) {
		return fmt.Errorf("%w: snapshot %s: %v", ErrCorrupt, SnapshotFile, err)
	}
	var sf snapshotFile
	if err := json.Unmarshal(p, &sf); err != nil {
		return fmt.Errorf("%w: snapshot %s: %v", ErrCorrupt, SnapshotFile, err)
	}
	if !reflect.DeepEqual(sf.Queue.Config, cfg) {
		return fmt.Errorf("%w: stored %+v, requested %+v", ErrConfigMismatch, sf.Queue.Config, cfg)
	}
	if s.q, err = shard.Restore(sf.Queue); err != nil {
		return fmt.Errorf("%w: snapshot %s: %v", ErrCorrupt, SnapshotFile, err)
	}
	s.seq = sf.Seq
	return nil
}

// replay applies the log after the snapshot and positions it for appends.
// A torn tail is cut off after the last complete record.
func (s *Store) replay() error {
	path := filepath.Join(s.dir, LogFile)
	f, err := fsperm.OpenRW(path)
	if err != nil {
		return fmt.Errorf("wal: open log: %w", err)
	}
	s.f = f
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("wal: read log: %w", err)
	}
	off, replayed := 0, 0
	var tailErr error
	for {
		p, n, err := readFrame(b[off:], MaxRecordLen)
		if err != nil {
			if !errors.Is(err, errTorn) {
				break // io.EOF: clean end
			}
			tailErr = err
			break
		}
		var r record
		if err := json.Unmarshal(p, &r); err != nil {
			tailErr = fmt.Errorf("%w: undecodable record: %v", errTorn, err)
			break
		}
		if r.Seq <= s.seq {
			off += n // already in the snapshot (crash before truncation)
			continue
		}
		if r.Seq != s.seq+1 {
			tailErr = fmt.Errorf("%w: sequence jumps from %d to %d", errTorn, s.seq, r.Seq)
			break
		}
		if _, err := s.q.Apply(r.Command); err != nil {
			return fmt.Errorf("%w: record %d (%+v) no longer applies: %v", ErrCorrupt, r.Seq, r.Command, err)
		}
		s.seq = r.Seq
		off += n
		replayed++
		s.sinceSnap++
	}
	if tailErr != nil {
		s.log.Warn().Err(tailErr).Int("offset", off).Int("ignored_bytes", len(b)-off).Uint64("last_seq", s.seq).
			Msg("shard log has a torn or corrupt tail; ignoring everything after the last complete record")
		if err := f.Truncate(int64(off)); err != nil {
			return fmt.Errorf("wal: cut torn tail: %w", err)
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("wal: sync after cut: %w", err)
		}
	}
	if _, err := f.Seek(int64(off), 0); err != nil {
		return fmt.Errorf("wal: seek: %w", err)
	}
	s.log.Info().Uint64("seq", s.seq).Int("replayed", replayed).Msg("shard store opened")
	return nil
}

// Apply applies cmd to the queue. If the queue changed, the command is
// appended to the log and fsync'd before Apply returns, so a returned
// result is durable. Errors from the queue (shard.ErrNoShard, ...) change
// nothing and are returned as they are; a failed write returns ErrFailed
// and leaves the store failed.
func (s *Store) Apply(cmd shard.Command) (shard.Result, error) {
	if s.failed != nil {
		return shard.Result{}, s.failed
	}
	res, err := s.q.Apply(cmd)
	if err != nil || !res.Changed {
		return res, err
	}
	if err := s.append(record{Seq: s.seq + 1, Command: cmd}); err != nil {
		s.failed = fmt.Errorf("%w: %v", ErrFailed, err)
		s.log.Error().Err(err).Msg("shard log write failed; store stopped")
		return shard.Result{}, s.failed
	}
	s.seq++
	s.sinceSnap++
	if s.sinceSnap >= s.opts.SnapshotEvery {
		if err := s.Checkpoint(); err != nil {
			// The log still holds everything; keep going.
			s.log.Warn().Err(err).Msg("shard snapshot failed; log kept")
		}
	}
	return res, nil
}

func (s *Store) append(r record) error {
	p, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if len(p) > MaxRecordLen {
		return fmt.Errorf("record of %d bytes exceeds %d", len(p), MaxRecordLen)
	}
	s.buf = appendFrame(s.buf[:0], p)
	if _, err := s.f.Write(s.buf); err != nil {
		return err
	}
	return s.f.Sync()
}

// Checkpoint writes a snapshot (temp file, fsync, rename, fsync of the
// directory) and then empties the log. A crash between the two steps is
// harmless: replay skips records the snapshot already contains.
func (s *Store) Checkpoint() error {
	if s.failed != nil {
		return s.failed
	}
	p, err := json.Marshal(snapshotFile{Seq: s.seq, Queue: s.q.Snapshot()})
	if err != nil {
		return fmt.Errorf("wal: encode snapshot: %w", err)
	}
	tmp := filepath.Join(s.dir, SnapshotFile+".tmp")
	if err := writeSynced(tmp, appendFrame(nil, p)); err != nil {
		return fmt.Errorf("wal: write snapshot: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, SnapshotFile)); err != nil {
		return fmt.Errorf("wal: install snapshot: %w", err)
	}
	if err := syncDir(s.dir); err != nil {
		return fmt.Errorf("wal: sync dir: %w", err)
	}
	if err := s.f.Truncate(0); err != nil {
		s.failed = fmt.Errorf("%w: truncate log: %v", ErrFailed, err)
		return s.failed
	}
	if _, err := s.f.Seek(0, 0); err != nil {
		s.failed = fmt.Errorf("%w: seek log: %v", ErrFailed, err)
		return s.failed
	}
	if err := s.f.Sync(); err != nil {
		s.failed = fmt.Errorf("%w: sync log: %v", ErrFailed, err)
		return s.failed
	}
	s.sinceSnap = 0
	s.log.Debug().Uint64("seq", s.seq).Msg("shard snapshot written")
	return nil
}

func writeSynced(path string, b []byte) error {
	f, err := fsperm.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Seq returns the sequence number of the last durable record.
func (s *Store) Seq() uint64 { return s.seq }

// Stats returns the queue's summary.
func (s *Store) Stats() shard.Stats { return s.q.Stats() }

// Snapshot returns the queue's state (a copy).
func (s *Store) Snapshot() shard.Snapshot { return s.q.Snapshot() }

// Holders returns the workers holding DOING shards, sorted.
func (s *Store) Holders() []string { return s.q.Holders() }

// Config returns the job's shard configuration.
func (s *Store) Config() shard.Config { return s.q.Config() }

// Close writes a final snapshot (best effort) and closes the log.
func (s *Store) Close() error {
	var err error
	if s.failed == nil && s.sinceSnap > 0 {
		err = s.Checkpoint()
	}
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	return err
}
