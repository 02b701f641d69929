package obs

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Who may read a rank's endpoints (/metrics, /events, /info,
// /debug/flight) and the dashboard's page: a server bound to a loopback
// address answers anyone on its host, as before; a server bound to any
// other address (another interface, or every one: 0.0.0.0, ":9400")
// answers only requests that carry the job's endpoint token,
//
//	Authorization: Bearer <Token(secret)>
//
// and refuses the rest with 401 and a line naming the fix. A non-loopback
// bind without the job secret is a configuration error (ErrOpenEndpoint).
// The token is derived from the job secret, so ringtail's own clients
// (the launcher's dashboard, `ringtail debug analyze --ranks`,
// `ringtail dashboard`) compute it from RINGTAIL_SECRET or
// RINGTAIL_SECRET_FILE, and a Prometheus scraper is given it
// (`ringtail debug token` prints it); the secret itself never travels.

// tokenLabel is the fixed message whose HMAC under the job secret is the
// endpoint token: a token read off the wire tells nothing of the secret,
// and it opens the endpoints only (no handshake accepts it).
const tokenLabel = "ringtail endpoint token v1"

// tokenCookie carries the token for a browser (which cannot add a header
// to the page's event stream): /?token=T sets it.
const tokenCookie = "ringtail_token"

// ErrOpenEndpoint is the error of a non-loopback bind without a job
// secret.
var ErrOpenEndpoint = errors.New("an endpoint beyond loopback needs the job secret")

// Token returns the endpoint token of a job secret: hex HMAC-SHA256 of a
// fixed label under the secret ("" for an empty secret).
func Token(secret []byte) string {
	if len(secret) == 0 {
		return ""
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(tokenLabel))
	return hex.EncodeToString(m.Sum(nil))
}

// IsLoopback reports whether a host:port binds loopback only: a loopback
// IP (127.0.0.0/8, ::1) or "localhost". An empty host, 0.0.0.0 and ::
// bind every interface.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// CheckExposure returns an error wrapping ErrOpenEndpoint, naming what
// sets addr, when addr is beyond loopback and there is no secret.
func CheckExposure(addr, what string, secret []byte) error {
	if IsLoopback(addr) || len(secret) > 0 {
		return nil
	}
	return fmt.Errorf("%s %s: %w: give the job a secret (RINGTAIL_SECRET or RINGTAIL_SECRET_FILE; ringtail run makes one) so that readers must send its token, or bind 127.0.0.1", what, addr, ErrOpenEndpoint)
}

// refusal is the body of a 401: what is missing and how to send it.
const refusal = "ringtail: this endpoint is bound beyond loopback and needs the job's endpoint token: send \"Authorization: Bearer TOKEN\" " +
	"with TOKEN from `ringtail debug token` (it reads RINGTAIL_SECRET or RINGTAIL_SECRET_FILE); ringtail's own clients send it when the job secret is set " +
	"(a browser: open the page once as /?token=TOKEN)"

// requireToken serves h to requests that carry token (as a bearer token,
// or the cookie /?token= sets when cookie is true) and refuses the rest
// with 401.
func requireToken(token string, cookie bool, h http.Handler) http.Handler {
	want := []byte(token)
	ok := func(got string) bool { return got != "" && subtle.ConstantTimeCompare([]byte(got), want) == 1 }
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if bearer, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); found && ok(bearer) {
			h.ServeHTTP(w, r)
			return
		}
		if cookie {
			if c, err := r.Cookie(tokenCookie); err == nil && ok(c.Value) {
				h.ServeHTTP(w, r)
				return
			}
			if q := r.URL.Query().Get("token"); ok(q) {
				http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
				http.Redirect(w, r, r.URL.Path, http.StatusSeeOther)
				return
			}
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="ringtail"`)
		http.Error(w, refusal, http.StatusUnauthorized)
	})
}

// authorize adds the bearer token to a request to a rank (none when
// token is empty).
func authorize(req *http.Request, token string) {
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
}
