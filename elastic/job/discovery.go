package job

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/internal/launch"
)

// ParseDiscovery reads a host discovery script's output: one host per
// line, "host", "host:slots" or "host slots=N" (the -H and hostfile
// forms); a host without a slot count has defaultSlots. '#' starts a
// comment; blank lines are skipped; no line at all means no host is
// available now. A host listed twice is an error.
func ParseDiscovery(out []byte, defaultSlots int) ([]launch.HostSlots, error) {
	var hosts []launch.HostSlots
	for i, line := range strings.Split(string(out), "\n") {
		if j := strings.IndexByte(line, '#'); j >= 0 {
			line = line[:j]
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		h, err := launch.ParseHostfile(strings.NewReader(line))
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		if !hasSlots(fields) {
			h[0].Slots = defaultSlots
		}
		if slices.ContainsFunc(hosts, func(o launch.HostSlots) bool { return o.Host == h[0].Host }) {
			return nil, fmt.Errorf("line %d: %w: host %s is listed twice", i+1, launch.ErrHostList, h[0].Host)
		}
		hosts = append(hosts, h[0])
	}
	return hosts, nil
}

// hasSlots reports whether a discovery line's fields give a slot count.
func hasSlots(fields []string) bool {
	for _, f := range fields[1:] {
		if strings.HasPrefix(f, "slots=") {
			return true
		}
	}
	host := fields[0]
	if i := strings.LastIndexByte(host, ']'); i >= 0 {
		host = host[i+1:]
	}
	return strings.Contains(host, ":")
}

// discoverer produces the hosts available to the job: a fixed list once,
// or a script's output every interval (sent when it changes).
type discoverer struct {
	static   []launch.HostSlots
	script   string
	slots    int
	interval time.Duration
	timeout  time.Duration // bound on one run of the script
	log      zerolog.Logger
	warn     func(string)
}

// run sends host lists to out until ctx ends.
func (d *discoverer) run(ctx context.Context, out chan<- []launch.HostSlots) {
	send := func(h []launch.HostSlots) bool {
		select {
		case out <- h:
			return true
		case <-ctx.Done():
			return false
		}
	}
	if d.script == "" {
		send(d.static)
		return
	}
	var last []launch.HostSlots
	sent, failing := false, false
	t := time.NewTicker(d.interval)
	defer t.Stop()
	for {
		hosts, err := d.once(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			if !failing { // once per run of failures, not every interval
				d.warn(fmt.Sprintf("host discovery failed (keeping the last host list): %v", err))
			}
			failing = true
		default:
			failing = false
			if !sent || !slices.Equal(hosts, last) {
				d.log.Debug().Str("hosts", fmt.Sprint(hosts)).Msg("job: discovered hosts")
				if !send(hosts) {
					return
				}
				last, sent = hosts, true
			}
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}

// once runs the script (sh -c) and parses its output.
func (d *discoverer) once(ctx context.Context) ([]launch.HostSlots, error) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", d.script)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	if err != nil {
		if ctx.Err() != nil && !strings.Contains(err.Error(), "exit status") {
			return nil, fmt.Errorf("%q did not finish within %v", d.script, d.timeout)
		}
		return nil, fmt.Errorf("%q: %w: %s", d.script, err, strings.TrimSpace(stderr.String()))
	}
	hosts, err := ParseDiscovery(out, d.slots)
	if err != nil {
		return nil, fmt.Errorf("%q printed a bad host list: %w", d.script, err)
	}
	return hosts, nil
}
