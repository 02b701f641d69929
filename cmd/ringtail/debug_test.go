package main

import (
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/internal/flight"
	"github.com/ringtail-ml/ringtail/internal/obs"
	"github.com/ringtail-ml/ringtail/internal/wire"
)

// `ringtail debug analyze DIR` prints the story of the dumps in DIR: here
// rank 2 completed call 3 and never called 4, which ranks 0 and 1 waited in.
func TestDebugAnalyzeTellsTheStoryOfADumpDirectory(t *testing.T) {
	dir := t.TempDir()
	for rank := range 3 {
		fl, err := flight.New(flight.Config{Rank: rank, World: 3, JobID: "job"})
		if err != nil {
			t.Fatal(err)
		}
		for c := uint64(1); c <= 3; c++ {
			fl.Begin(&wire.Desc{Collective: wire.AllReduce, Group: wire.World, Call: c, Count: 1024, DType: 1}, "ring", "")
			fl.End(nil)
		}
		if rank < 2 {
			fl.Begin(&wire.Desc{Collective: wire.AllReduce, Group: wire.World, Call: 4, Count: 1024, DType: 1}, "ring", "")
			fl.End(nil)
		}
		f := &flight.Failure{Kind: "timeout", Rank: 2, Reporter: 0}
		if _, err := flight.Write(dir, fl.Snapshot("failure", f, time.Second, 0)); err != nil {
			t.Fatal(err)
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"debug", "analyze", dir}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"job job generation 0, 3 ranks:", "rank 2 completed AllReduce #3", "never called #4"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if code := run([]string{"debug", "analyze", dir, "--json"}, &out, &errb); code != 0 || !strings.Contains(out.String(), `"culprits": [`) {
		t.Errorf("--json: exit %d: %s", code, out.String())
	}
	if code := run([]string{"debug", "analyze", t.TempDir()}, &out, &errb); code != 1 {
		t.Errorf("an empty directory: exit %d", code)
	}
	if code := run([]string{"debug", "analyze"}, &out, &errb); code != 2 {
		t.Errorf("no directory: exit %d", code)
	}
}

// `ringtail debug analyze --ranks` reads a live rank bound beyond
// loopback with the token it derives from RINGTAIL_SECRET; without the
// secret the rank refuses it and the line says what to set.
// `ringtail debug token` prints the token a scraper sends.
func TestDebugAnalyzeSendsTheEndpointToken(t *testing.T) {
	secret := "debug-token-test-secret-0123456"
	fl, err := flight.New(flight.Config{Rank: 0, World: 1, JobID: "job"})
	if err != nil {
		t.Fatal(err)
	}
	fl.Begin(&wire.Desc{Collective: wire.AllReduce, Group: wire.World, Call: 1, Count: 8, DType: 1}, "ring", "")
	fl.End(nil)
	rec, err := obs.New(obs.Config{Rank: 0, World: 1, MetricsAddr: "0.0.0.0:0", Secret: []byte(secret),
		Flight: func(w io.Writer, last int) error { return fl.WriteLive(w, last) }})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	_, port, _ := net.SplitHostPort(rec.Addr())
	target := net.JoinHostPort("127.0.0.1", port)

	t.Setenv("RINGTAIL_SECRET", "")
	t.Setenv("RINGTAIL_SECRET_FILE", "")
	var out, errb bytes.Buffer
	if code := run([]string{"debug", "analyze", "--ranks", target}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "401") || !strings.Contains(errb.String(), "RINGTAIL_SECRET") {
		t.Fatalf("without the secret: exit %d: %s", code, errb.String())
	}
	if code := run([]string{"debug", "token"}, &out, &errb); code != 2 {
		t.Fatalf("debug token without a secret: exit %d", code)
	}
	t.Setenv("RINGTAIL_SECRET", secret)
	out.Reset()
	errb.Reset()
	if code := run([]string{"debug", "analyze", "--ranks", target}, &out, &errb); code != 0 || !strings.Contains(out.String(), "job job generation 0, 1 ranks") || errb.Len() != 0 {
		t.Fatalf("with the secret: exit %d: %s %s", code, out.String(), errb.String())
	}
	out.Reset()
	if code := run([]string{"debug", "token"}, &out, &errb); code != 0 || strings.TrimSpace(out.String()) != obs.Token([]byte(secret)) {
		t.Fatalf("debug token: exit %d: %q", code, out.String())
	}
}
