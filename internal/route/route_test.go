package route

import (
	"context"
	"testing"
)

func TestLocalIPTowardLoopbackIsLoopback(t *testing.T) {
	ip, err := LocalIP(context.Background(), "127.0.0.1")
	if err != nil || !ip.IsLoopback() {
		t.Fatalf("got %v, %v", ip, err)
	}
}

func TestLocalIPEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := LocalIP(ctx, "no-such-host.invalid"); err == nil {
		t.Fatal("a name under a cancelled context resolved")
	}
}
