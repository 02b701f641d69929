package job

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/internal/launch"
)

func TestParseDiscovery(t *testing.T) {
	got, err := ParseDiscovery([]byte("# hosts now\nh0\nh1:4\nh2 slots=2\n\n[fe80::1]\n[fe80::2]:3 # comment\n"), 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []launch.HostSlots{{Host: "h0", Slots: 2}, {Host: "h1", Slots: 4}, {Host: "h2", Slots: 2}, {Host: "fe80::1", Slots: 2}, {Host: "fe80::2", Slots: 3}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if got, err := ParseDiscovery([]byte("\n# nothing now\n"), 1); err != nil || len(got) != 0 {
		t.Fatalf("no host: %v, %v", got, err)
	}
	for _, bad := range []string{"h0\nh0:2\n", "h0:0\n", "-oProxyCommand=x\n", "h0 slots=x\n"} {
		if _, err := ParseDiscovery([]byte(bad), 1); !errors.Is(err, launch.ErrHostList) {
			t.Errorf("%q: %v, want ErrHostList", bad, err)
		}
	}
}

// The script is run every interval; a new list is sent only when it
// changes; a failing script keeps the last list and warns once.
func TestDiscovererSendsChanges(t *testing.T) {
	dir := t.TempDir()
	list := filepath.Join(dir, "hosts")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(list, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a:2\n")
	warnings := make(chan string, 16)
	d := &discoverer{script: "cat " + list, slots: 1, interval: 10 * time.Millisecond, timeout: 5 * time.Second,
		log: zerolog.Nop(), warn: func(s string) { warnings <- s }}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out := make(chan []launch.HostSlots)
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.run(ctx, out)
	}()
	if got := <-out; !reflect.DeepEqual(got, []launch.HostSlots{{Host: "a", Slots: 2}}) {
		t.Fatalf("first list %v", got)
	}
	write("a:2\nb\n")
	if got := <-out; len(got) != 2 || got[1] != (launch.HostSlots{Host: "b", Slots: 1}) {
		t.Fatalf("second list %v", got)
	}
	if err := os.Remove(list); err != nil {
		t.Fatal(err)
	}
	if w := <-warnings; !strings.Contains(w, "keeping the last host list") {
		t.Fatalf("warning %q", w)
	}
	write("b\n")
	if got := <-out; !reflect.DeepEqual(got, []launch.HostSlots{{Host: "b", Slots: 1}}) {
		t.Fatalf("third list %v", got)
	}
	cancel()
	<-done
	if len(warnings) != 0 {
		t.Fatalf("more than one warning for one run of failures: %q", <-warnings)
	}
}
