package obs

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/internal/flight"
	"github.com/ringtail-ml/ringtail/internal/wire"
)

var testSecret = []byte("endpoint-test-secret-0123456789")

// onLoopback is addr (a server bound to every interface) as a client on
// this host reaches it.
func onLoopback(t *testing.T, addr string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", port)
}

// get fetches url with the given Authorization header ("" for none) and
// returns the status and body.
func get(t *testing.T, client *http.Client, url, auth string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestLoopbackAddresses(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:9400": true, "127.1.2.3:0": true, "[::1]:9400": true, "localhost:9400": true, "LOCALHOST:1": true,
		"0.0.0.0:9400": false, ":9400": false, "[::]:9400": false, "10.0.0.7:9400": false, "node3:9400": false, "9400": false,
	} {
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// The token is the HMAC of a fixed label: stable for a secret, different
// across secrets, never the secret itself, none without one.
func TestTokenIsDerivedFromTheSecret(t *testing.T) {
	a, b := Token(testSecret), Token([]byte("another-secret-0123456789"))
	if a != Token(testSecret) || a == b || len(a) != 64 || strings.Contains(a, string(testSecret)) || Token(nil) != "" {
		t.Fatalf("tokens %q %q", a, b)
	}
}

// A rank or a dashboard bound beyond loopback without the job secret is a
// configuration error that names the variable and the fix; on loopback,
// or with the secret, it is not.
func TestAnEndpointBeyondLoopbackNeedsTheSecret(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		_, err := New(Config{Rank: 0, World: 1, MetricsAddr: addr, HostProc: fakeProc()})
		if !errors.Is(err, ErrOpenEndpoint) || !strings.Contains(err.Error(), "RINGTAIL_METRICS_ADDR") || !strings.Contains(err.Error(), "RINGTAIL_SECRET") {
			t.Errorf("metrics on %s without a secret: %v", addr, err)
		}
		_, err = NewDashboard(DashboardConfig{Listen: addr, Targets: []string{"127.0.0.1:1"}})
		if !errors.Is(err, ErrOpenEndpoint) || !strings.Contains(err.Error(), "dashboard address") {
			t.Errorf("dashboard on %s without a secret: %v", addr, err)
		}
	}
	c := Config{Rank: 0, World: 1, MetricsAddr: "127.0.0.1:0"}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c = Config{Rank: 0, World: 1, MetricsAddr: "0.0.0.0:0", Secret: testSecret}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

// servingFlight is a rank with three calls recorded, serving on addr with
// secret.
func servingFlight(t *testing.T, addr string, secret []byte) *Recorder {
	t.Helper()
	fl, err := flight.New(flight.Config{Rank: 0, World: 1, JobID: "job"})
	if err != nil {
		t.Fatal(err)
	}
	for c := 1; c <= 3; c++ {
		fl.Begin(&wire.Desc{Collective: wire.AllReduce, Group: wire.World, Call: uint64(c), Count: 8}, "ring", "")
		fl.End(nil)
	}
	r, err := New(Config{Rank: 0, World: 1, Host: "testhost", MetricsAddr: addr, Secret: secret, HostProc: fakeProc(),
		Flight: func(w io.Writer, last int) error { return fl.WriteLive(w, last) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// Beyond loopback every endpoint answers 401, with a line naming the fix,
// to a request without the token or with a wrong one, and 200 with it;
// ringtail's own readers (FetchFlight, the dashboard) send it.
func TestAnEndpointBeyondLoopbackWantsTheToken(t *testing.T) {
	r := servingFlight(t, "0.0.0.0:0", testSecret)
	base := "http://" + onLoopback(t, r.Addr())
	token := Token(testSecret)
	for _, path := range []string{"/metrics", "/info", "/debug/flight?last=2", "/events", "/"} {
		for _, auth := range []string{"", "Bearer wrong", "Bearer " + Token([]byte("another-secret-0123456789")), token, "Basic " + token} {
			code, body := get(t, http.DefaultClient, base+path, auth)
			if code != http.StatusUnauthorized || !strings.Contains(body, "Authorization: Bearer") || !strings.Contains(body, "ringtail debug token") {
				t.Errorf("%s with %q: %d %q", path, auth, code, body)
			}
		}
		if path == "/events" {
			continue // a stream: read below
		}
		if code, body := get(t, http.DefaultClient, base+path, "Bearer "+token); code != http.StatusOK {
			t.Errorf("%s with the token: %d %q", path, code, body)
		}
	}
	if _, errs := FetchFlight([]string{onLoopback(t, r.Addr())}, "", 2, 30*time.Second); len(errs) != 1 || !strings.Contains(errs[0].Error(), "401") || !strings.Contains(errs[0].Error(), "RINGTAIL_SECRET") {
		t.Errorf("FetchFlight without the token: %v", errs)
	}
	dumps, errs := FetchFlight([]string{onLoopback(t, r.Addr())}, token, 2, 30*time.Second)
	if len(errs) > 0 || len(dumps) != 1 || len(dumps[0].Entries) != 2 || dumps[0].Entries[1].Call != 3 {
		t.Fatalf("FetchFlight with the token: %v %v", dumps, errs)
	}
	d, err := NewDashboard(DashboardConfig{Listen: "127.0.0.1:0", Secret: testSecret, Targets: []string{onLoopback(t, r.Addr())}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	readEvents(t, d.URL()+"api/events", func(kind string, m map[string]any) bool {
		return kind == "info" && m["host"] == "testhost"
	})
}

// A rank on loopback answers without a token (the default: nothing but
// this host reaches it), even when the job has a secret.
func TestALoopbackEndpointIsOpenToItsHost(t *testing.T) {
	r := servingFlight(t, "127.0.0.1:0", testSecret)
	if code, body := get(t, http.DefaultClient, "http://"+r.Addr()+"/debug/flight?last=1", ""); code != http.StatusOK || !strings.Contains(body, `"reason": "live"`) {
		t.Fatalf("%d %q", code, body)
	}
}

// A dashboard beyond loopback refuses a browser without the token; its
// URL carries the token, and opening it once sets a cookie that opens the
// page and its event stream.
func TestADashboardBeyondLoopbackWantsTheToken(t *testing.T) {
	r := servingFlight(t, "127.0.0.1:0", nil)
	d, err := NewDashboard(DashboardConfig{Listen: "0.0.0.0:0", Secret: testSecret, Targets: []string{r.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	base := "http://" + onLoopback(t, d.Addr())
	for _, path := range []string{"/", "/api/events", "/?token=wrong"} {
		if code, body := get(t, http.DefaultClient, base+path, ""); code != http.StatusUnauthorized || !strings.Contains(body, "token") {
			t.Errorf("%s: %d %q", path, code, body)
		}
	}
	if !strings.Contains(d.URL(), "?token="+Token(testSecret)) {
		t.Fatalf("URL %q does not carry the token", d.URL())
	}
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	if code, body := get(t, browser, base+"/?token="+Token(testSecret), ""); code != http.StatusOK || !strings.Contains(body, "<html") {
		t.Fatalf("the page with the token: %d %.200q", code, body)
	}
	if code, _ := get(t, browser, base+"/api/timeline", ""); code != http.StatusNotFound {
		t.Fatalf("the cookie did not open /api/timeline: %d", code)
	}
	if code, _ := get(t, http.DefaultClient, base+"/", "Bearer "+Token(testSecret)); code != http.StatusOK {
		t.Fatalf("the page with the bearer token: %d", code)
	}
}
