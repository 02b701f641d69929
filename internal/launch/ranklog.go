package launch

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/ringtail-ml/ringtail/internal/fsperm"
)

// rankLogs holds the per-rank log files of Config.OutputDir (nil: none).
type rankLogs struct {
	files [][2]*os.File // [rank]{stdout, stderr}
}

// openRankLogs creates dir/rank.N/stdout and dir/rank.N/stderr for n
// ranks, N zero-padded to the width of n-1. An empty dir opens nothing.
func openRankLogs(dir string, n int) (*rankLogs, error) {
	if dir == "" {
		return nil, nil
	}
	l := &rankLogs{}
	width := len(strconv.Itoa(max(n-1, 0)))
	for r := range n {
		d := filepath.Join(dir, fmt.Sprintf("rank.%0*d", width, r))
		if err := fsperm.MkdirAll(d); err != nil {
			l.close()
			return nil, err
		}
		var pair [2]*os.File
		for i, name := range []string{"stdout", "stderr"} {
			f, err := fsperm.Create(filepath.Join(d, name))
			if err != nil {
				if pair[0] != nil {
					pair[0].Close()
				}
				l.close()
				return nil, err
			}
			pair[i] = f
		}
		l.files = append(l.files, pair)
	}
	return l, nil
}

// file returns the log of one rank's stdout or stderr, or nil.
func (l *rankLogs) file(rank int, stderr bool) io.Writer {
	if l == nil || rank >= len(l.files) {
		return nil
	}
	if stderr {
		return l.files[rank][1]
	}
	return l.files[rank][0]
}

// close closes every file (after the ranks' output is drained).
func (l *rankLogs) close() {
	if l == nil {
		return
	}
	for _, pair := range l.files {
		pair[0].Close()
		pair[1].Close()
	}
}

// ErrNoInterfaceAddr is wrapped by InterfaceIP when none of the
// interfaces has an IPv4 address on this host.
var ErrNoInterfaceAddr = errors.New("no IPv4 address on the network interfaces")

// InterfaceIP returns the first IPv4 address of the first of names that
// exists on this host and has one (the address a rank pinned with
// Config.Interfaces listens on).
func InterfaceIP(names []string) (string, error) {
	var errs []error
	for _, name := range names {
		ifc, err := net.InterfaceByName(name)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
				return n.IP.String(), nil
			}
		}
		errs = append(errs, fmt.Errorf("%s has no IPv4 address", name))
	}
	return "", fmt.Errorf("%w %v: %w", ErrNoInterfaceAddr, names, errors.Join(errs...))
}
