package loopback

import "testing"

// FreePorts holds every port it found until it returns, so the n ports are
// distinct.
func TestFreePortsAreDistinct(t *testing.T) {
	ports, err := FreePorts(8)
	if err != nil {
		t.Fatal(err)
	}
	if len(ports) != 8 {
		t.Fatalf("got %d ports, want 8", len(ports))
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p <= 0 || p > 65535 || seen[p] {
			t.Fatalf("ports %v: %d repeated or out of range", ports, p)
		}
		seen[p] = true
	}
}
