package launch

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// HostSlots is one host of a job and how many ranks it runs. Ranks are
// assigned to hosts in list order, Slots consecutive ranks per host.
type HostSlots struct {
	Host  string
	Slots int
}

// String formats h as "host:slots" (IPv6 addresses in brackets), the form
// ParseHosts reads.
func (h HostSlots) String() string {
	host := h.Host
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return host + ":" + strconv.Itoa(h.Slots)
}

// ErrHostList is wrapped by every error of ParseHosts and ParseHostfile.
var ErrHostList = errors.New("bad host list")

// ParseHosts parses a comma-separated host list as given to -H:
// "host1:2,host2:2". A host without ":slots" has one slot; IPv6
// addresses go in brackets ("[fe80::1]:4"). It does not check for
// duplicates; Config.Validate does.
func ParseHosts(s string) ([]HostSlots, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("%w: empty", ErrHostList)
	}
	var hosts []HostSlots
	for _, item := range strings.Split(s, ",") {
		h, err := parseHostSlots(strings.TrimSpace(item))
		if err != nil {
			return nil, err
		}
		hosts = append(hosts, h)
	}
	return hosts, nil
}

func parseHostSlots(item string) (HostSlots, error) {
	if item == "" {
		return HostSlots{}, fmt.Errorf("%w: empty entry", ErrHostList)
	}
	host, slots := item, ""
	if strings.HasPrefix(item, "[") {
		end := strings.Index(item, "]")
		if end < 0 {
			return HostSlots{}, fmt.Errorf("%w: %q: missing ']'", ErrHostList, item)
		}
		host, slots = item[1:end], item[end+1:]
		if slots != "" && !strings.HasPrefix(slots, ":") {
			return HostSlots{}, fmt.Errorf("%w: %q: expected ':slots' after ']'", ErrHostList, item)
		}
		slots = strings.TrimPrefix(slots, ":")
	} else if i := strings.LastIndex(item, ":"); i >= 0 {
		if strings.Count(item, ":") > 1 {
			return HostSlots{}, fmt.Errorf("%w: %q: put IPv6 addresses in brackets, as in [::1]:2", ErrHostList, item)
		}
		host, slots = item[:i], item[i+1:]
	}
	h := HostSlots{Host: host, Slots: 1}
	if slots != "" || strings.HasSuffix(item, ":") {
		n, err := strconv.Atoi(slots)
		if err != nil || n < 1 {
			return HostSlots{}, fmt.Errorf("%w: %q: slots %q must be a positive integer", ErrHostList, item, slots)
		}
		h.Slots = n
	}
	if err := checkHostName(h.Host); err != nil {
		return HostSlots{}, fmt.Errorf("%w: %q: %w", ErrHostList, item, err)
	}
	return h, nil
}

// checkHostName rejects names that ssh would take for an option or that
// cannot be a host.
func checkHostName(host string) error {
	switch {
	case host == "":
		return errors.New("empty host name")
	case strings.HasPrefix(host, "-"):
		return fmt.Errorf("host name %q starts with '-'", host)
	case strings.ContainsAny(host, " \t\r\n'\"\\;&|<>()$`*?,/"):
		return fmt.Errorf("host name %q contains a character not allowed in a host name", host)
	}
	return nil
}

// ParseHostfile reads a hostfile in the horovod/mpirun format: one host
// per line, "host slots=N" ("host" alone has one slot); '#' starts a
// comment; blank lines are skipped. "host:N" is accepted too.
func ParseHostfile(r io.Reader) ([]HostSlots, error) {
	var hosts []HostSlots
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		fields := strings.Fields(text)
		if len(fields) == 0 {
			continue
		}
		h, err := parseHostSlots(fields[0])
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		for _, f := range fields[1:] {
			k, v, ok := strings.Cut(f, "=")
			switch {
			case ok && k == "slots":
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 {
					return nil, fmt.Errorf("line %d: %w: slots=%q must be a positive integer", line, ErrHostList, v)
				}
				h.Slots = n
			case ok && k == "max_slots":
				// mpirun's oversubscription limit; ringtail never oversubscribes.
			default:
				return nil, fmt.Errorf("line %d: %w: unexpected %q (want \"host slots=N\")", line, ErrHostList, f)
			}
		}
		hosts = append(hosts, h)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("hostfile: %w", err)
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("%w: hostfile lists no host", ErrHostList)
	}
	return hosts, nil
}

// TotalSlots returns the sum of the hosts' slots.
func TotalSlots(hosts []HostSlots) int {
	n := 0
	for _, h := range hosts {
		n += h.Slots
	}
	return n
}
