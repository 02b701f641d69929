package ringtail

import (
	"context"
	"hash/fnv"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/ringtail-ml/ringtail/internal/engine"
	"github.com/ringtail-ml/ringtail/internal/flight"
)

// DefaultFlightSize is how many calls the flight recorder keeps by
// default (Config.FlightSize, RINGTAIL_FLIGHT_SIZE).
const DefaultFlightSize = flight.DefaultSize

// siteKey is the context key of WithCallSite.
type siteKey struct{}

// WithCallSite returns ctx naming site as the call site of the
// collectives called with it, for the call-site check (Config.Debug
// "detail") of a binding whose callers are not Go code: the C API takes
// it from rt_call_site, the PyTorch backend from the Python stack. Ranks
// must name the same call the same way. Without it the check hashes the
// Go caller's program counters.
func WithCallSite(ctx context.Context, site string) context.Context {
	return context.WithValue(ctx, siteKey{}, site)
}

// maxSiteFrames is how many of the caller's frames make a call site's
// fingerprint; siteNameFrames how many name it.
const (
	maxSiteFrames  = 8
	siteNameFrames = 2
)

// siteCache resolves call sites by their program counters, once each
// (calls from several goroutines share it).
type siteCache struct {
	mu sync.Mutex
	m  map[[maxSiteFrames + 4]uintptr]callSite
}

type callSite struct {
	name string
	fp   uint64
}

// markSite gives cl its call site (the communicator checks call sites).
func (c *Comm) markSite(ctx context.Context, cl *engine.Call) {
	if s, ok := ctx.Value(siteKey{}).(string); ok && s != "" {
		cl.Site, cl.SiteFP = s, fingerprint(s)
		return
	}
	var pcs [maxSiteFrames + 4]uintptr
	n := runtime.Callers(2, pcs[:])
	c.sites.mu.Lock()
	cs, ok := c.sites.m[pcs]
	c.sites.mu.Unlock()
	if !ok {
		cs = resolveSite(pcs[:n])
		c.sites.mu.Lock()
		if c.sites.m == nil || len(c.sites.m) >= 4096 {
			c.sites.m = map[[maxSiteFrames + 4]uintptr]callSite{}
		}
		c.sites.m[pcs] = cs
		c.sites.mu.Unlock()
	}
	cl.Site, cl.SiteFP = cs.name, cs.fp
}

// rootPackage prefixes the functions of this package.
const rootPackage = "github.com/ringtail-ml/ringtail."

// resolveSite names the caller's frames outside this package (its tests
// count as callers) and fingerprints them by function, file name and
// line: the same code in another process, or on another host with another
// checkout path, has the same fingerprint.
func resolveSite(pcs []uintptr) callSite {
	frames := runtime.CallersFrames(pcs)
	var names, keys []string
	for len(keys) < maxSiteFrames {
		f, more := frames.Next()
		fn := f.Function
		inRoot := strings.HasPrefix(fn, rootPackage) && !strings.Contains(strings.TrimPrefix(fn, rootPackage), "/") &&
			!strings.HasSuffix(f.File, "_test.go")
		switch {
		case fn == "":
		case inRoot && len(keys) == 0:
		case fn == "runtime.goexit" || fn == "runtime.main" || fn == "testing.tRunner":
			more = false
		default:
			at := filepath.Base(f.File) + ":" + strconv.Itoa(f.Line)
			keys = append(keys, fn+" "+at)
			if len(names) < siteNameFrames {
				names = append(names, at+" ("+shortFunc(fn)+")")
			}
		}
		if !more {
			break
		}
	}
	if len(keys) == 0 {
		return callSite{name: "unknown", fp: 1}
	}
	return callSite{name: strings.Join(names, " ← "), fp: fingerprint(strings.Join(keys, "\n"))}
}

// shortFunc drops a function's package path: "main.train".
func shortFunc(fn string) string {
	if i := strings.LastIndex(fn, "/"); i >= 0 {
		return fn[i+1:]
	}
	return fn
}

// fingerprint hashes a call site's frames (never 0).
func fingerprint(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	if v := h.Sum64(); v != 0 {
		return v
	}
	return 1
}
