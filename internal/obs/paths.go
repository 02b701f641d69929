package obs

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
)

// RankTimelinePath is the file rank writes when the job's timeline is
// path: path itself for a single rank, else path with ".rank<r>"
// before its extension (trace.json → trace.rank2.json), so that ranks
// sharing a directory do not collide and Merge finds them (ringtail timeline merge).
func RankTimelinePath(path string, rank, world int) string {
	if world <= 1 {
		return path
	}
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + ".rank" + strconv.Itoa(rank) + ext
}

// RankMetricsAddr resolves a metrics address whose port ends in "+"
// ("host:9400+", for launchers that give every rank of a host the same
// environment) to the port plus localRank; other addresses are returned
// as they are.
func RankMetricsAddr(addr string, localRank int) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("%q is not host:port: %w", addr, err)
	}
	base, plus := strings.CutSuffix(port, "+")
	if !plus {
		return addr, nil
	}
	p, err := strconv.Atoi(base)
	if err != nil || p < 1 || p+localRank > 65535 {
		return "", fmt.Errorf("%q: port %q+%d is not in 1..65535", addr, base, localRank)
	}
	return net.JoinHostPort(host, strconv.Itoa(p+localRank)), nil
}
