package engine

import (
	"context"
	"hash/fnv"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// siteKey is the context key of WithCallSite.
type siteKey struct{}

// WithCallSite returns ctx naming site as the call site of the
// collectives called with it (ringtail.WithCallSite).
func WithCallSite(ctx context.Context, site string) context.Context {
	return context.WithValue(ctx, siteKey{}, site)
}

// maxSiteFrames is how many of the caller's frames make a call site's
// fingerprint; siteNameFrames how many name it.
const (
	maxSiteFrames  = 8
	siteNameFrames = 2
)

// Sites resolves call sites by their program counters, once each
// (calls from several goroutines share it).
type Sites struct {
	mu sync.Mutex
	m  map[[maxSiteFrames + 4]uintptr]callSite
}

type callSite struct {
	name string
	fp   uint64
}

// Mark gives cl its call site (the communicator checks call sites):
// the one ctx names (WithCallSite), else its caller's outside ringtail.
func (c *Sites) Mark(ctx context.Context, cl *Call) {
	if s, ok := ctx.Value(siteKey{}).(string); ok && s != "" {
		cl.Site, cl.SiteFP = s, fingerprint(s)
		return
	}
	var pcs [maxSiteFrames + 4]uintptr
	n := runtime.Callers(2, pcs[:])
	c.mu.Lock()
	cs, ok := c.m[pcs]
	c.mu.Unlock()
	if !ok {
		cs = resolveSite(pcs[:n])
		c.mu.Lock()
		if c.m == nil || len(c.m) >= 4096 {
			c.m = map[[maxSiteFrames + 4]uintptr]callSite{}
		}
		c.m[pcs] = cs
		c.mu.Unlock()
	}
	cl.Site, cl.SiteFP = cs.name, cs.fp
}

// The functions of the root package and of this one (the communicator's
// own frames, skipped before the caller's).
const (
	rootPackage   = "github.com/ringtail-ml/ringtail."
	enginePackage = "github.com/ringtail-ml/ringtail/internal/engine."
)

// resolveSite names the caller's frames outside ringtail's own (its tests
// count as callers) and fingerprints them by function, file name and
// line: the same code in another process, or on another host with another
// checkout path, has the same fingerprint.
func resolveSite(pcs []uintptr) callSite {
	frames := runtime.CallersFrames(pcs)
	var names, keys []string
	for len(keys) < maxSiteFrames {
		f, more := frames.Next()
		fn := f.Function
		own := (ownFunc(fn, rootPackage) || ownFunc(fn, enginePackage)) && !strings.HasSuffix(f.File, "_test.go")
		switch {
		case fn == "":
		case own && len(keys) == 0:
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

// ownFunc reports whether fn is a function of the package pkg prefixes
// (not of a package below it).
func ownFunc(fn, pkg string) bool {
	return strings.HasPrefix(fn, pkg) && !strings.Contains(strings.TrimPrefix(fn, pkg), "/")
}
