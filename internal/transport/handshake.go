package transport

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/ringtail-ml/ringtail/internal/wire"
)

// Identity is what a rank proves about itself when it connects: the job,
// its rank in a world of a given size, the membership generation, and
// knowledge of the job secret (never sent; used as the HMAC key).
type Identity struct {
	JobID      string
	Rank       int
	World      int
	Generation uint64
	Secret     []byte
	// Frames is how frames are protected on links that cross hosts
	// (the zero value: an AEAD tag on every frame); both ends of a TCP
	// link must agree.
	Frames FrameAuth
}

// Validate checks the identity's fields.
func (id Identity) Validate() error {
	switch {
	case id.World <= 0:
		return fmt.Errorf("transport: world size %d must be positive", id.World)
	case id.Rank < 0 || id.Rank >= id.World:
		return fmt.Errorf("transport: rank %d outside world of %d", id.Rank, id.World)
	case len(id.JobID) == 0 || len(id.JobID) > wire.MaxJobID:
		return fmt.Errorf("transport: job id must be 1..%d bytes, got %d", wire.MaxJobID, len(id.JobID))
	case !id.Frames.Valid():
		return fmt.Errorf("transport: unknown frame protection %v", id.Frames)
	}
	return nil
}

// ErrAuth is wrapped by every authentication failure.
var ErrAuth = errors.New("authentication failed")

// JobTag is the keyed tag a Hello carries for id's job: it names the job
// to a rank that knows the secret and tells a stranger nothing.
func (id Identity) JobTag() [wire.JobTagSize]byte {
	h := hmac.New(sha256.New, id.Secret)
	h.Write([]byte("ringtail/v2/job\x00"))
	h.Write([]byte(id.JobID))
	var out [wire.JobTagSize]byte
	copy(out[:], h.Sum(nil))
	return out
}

func mac(secret []byte, role string, hello []byte, nonce []byte) [wire.MACSize]byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte("ringtail/v1/" + role + "\x00"))
	h.Write(hello)
	h.Write(nonce)
	var out [wire.MACSize]byte
	copy(out[:], h.Sum(nil))
	return out
}

// deadlineFrom bounds conn's I/O by limit and ctx; it returns the deadline
// and the function that lifts it.
func deadlineFrom(ctx context.Context, conn net.Conn, limit time.Duration) (time.Time, func()) {
	dl := time.Now().Add(limit)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	_ = conn.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	return dl, func() {
		stop()
		_ = conn.SetDeadline(time.Time{})
	}
}

// HandshakeTimeout bounds one handshake when the context allows longer.
const HandshakeTimeout = 10 * time.Second

// HelloTimeout bounds the wait for a dialer's first frame: a rank sends
// its Hello as soon as it connects, so an idle connection is a stranger's
// and gives its slot back quickly.
const HelloTimeout = 3 * time.Second

// DialHandshake authenticates a freshly dialed connection to rank peer on
// the given channel. Both sides prove the secret (HMAC-SHA256 challenge–
// response over both nonces and the whole Hello), so neither a stranger nor
// an impostor listener is ever sent a data frame. It returns the link's
// frame keys (used where the link crosses hosts).
func DialHandshake(ctx context.Context, conn net.Conn, id Identity, peer, channel int) (FrameKeys, error) {
	_, lift := deadlineFrom(ctx, conn, HandshakeTimeout)
	defer lift()
	hello := wire.Hello{Version: wire.Version, Channel: uint16(channel), Rank: uint32(id.Rank), Peer: uint32(peer),
		World: uint32(id.World), Generation: id.Generation, JobTag: id.JobTag(), Frames: uint8(id.Frames)}
	if _, err := rand.Read(hello.Nonce[:]); err != nil {
		return FrameKeys{}, err
	}
	hb := hello.Marshal()
	if err := wire.WriteControl(conn, wire.TypeHello, hb); err != nil {
		return FrameKeys{}, fmt.Errorf("send hello to rank %d: %w", peer, err)
	}
	t, p, err := wire.ReadAnyControl(conn)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || isReset(err) {
			// A listener of this version answers every Hello, even one of
			// another version, with a challenge or a verdict; one of an
			// older release that does not know this Hello closes without
			// a word, and so does one busy refusing strangers.
			return FrameKeys{}, fmt.Errorf("read challenge from rank %d: %w (closed without an answer: the rank is busy refusing strangers, or runs an older ringtail release that does not speak protocol version %d; upgrade every rank to the same release)",
				peer, err, wire.Version)
		}
		return FrameKeys{}, fmt.Errorf("read challenge from rank %d: %w", peer, err)
	}
	if t == wire.TypeVerdict {
		v, err := wire.ParseVerdict(p)
		if err != nil {
			return FrameKeys{}, err
		}
		return FrameKeys{}, fmt.Errorf("%w: rank %d refused us: %s", ErrAuth, peer, v.Reason)
	}
	if t != wire.TypeChallenge {
		return FrameKeys{}, fmt.Errorf("%w: got %v frame from rank %d, want challenge", wire.ErrMalformed, t, peer)
	}
	ch, err := wire.ParseChallenge(p)
	if err != nil {
		return FrameKeys{}, err
	}
	if want := mac(id.Secret, "listener", hb, ch.Nonce[:]); !hmac.Equal(want[:], ch.MAC[:]) {
		return FrameKeys{}, fmt.Errorf("%w: rank %d at %s does not know the job secret", ErrAuth, peer, conn.RemoteAddr())
	}
	resp := mac(id.Secret, "dialer", hb, ch.Nonce[:])
	if err := wire.WriteControl(conn, wire.TypeResponse, resp[:]); err != nil {
		return FrameKeys{}, fmt.Errorf("send response to rank %d: %w", peer, err)
	}
	p, err = wire.ReadControl(conn, wire.TypeVerdict)
	if err != nil {
		return FrameKeys{}, fmt.Errorf("read verdict from rank %d: %w", peer, err)
	}
	v, err := wire.ParseVerdict(p)
	if err != nil {
		return FrameKeys{}, err
	}
	if !v.OK {
		return FrameKeys{}, fmt.Errorf("%w: rank %d refused us: %s", ErrAuth, peer, v.Reason)
	}
	return deriveKeys(id.Secret, &hello, &ch.Nonce, true)
}

// AcceptHandshake authenticates a connection accepted by rank id.Rank. It
// returns the dialer's Hello; on any failure it has already told the dialer
// why (when the dialer got that far) and the caller should close the
// connection and log the refusal with conn.RemoteAddr().
//
// Nothing about this rank's job is revealed before the dialer has proved
// the secret: the challenge is sent whatever the Hello says, a dialer that
// fails it is told only that authentication failed, and the reasons that
// name the job, world, rank or generation go to authenticated dialers
// alone. The Hello is at most wire.MaxControlPayload bytes, read into one
// small buffer. It also returns the link's frame keys (used where the link
// crosses hosts): a dialer that crosses hosts with another protection
// than id.Frames is refused.
func AcceptHandshake(ctx context.Context, conn net.Conn, id Identity) (wire.Hello, FrameKeys, error) {
	dl, lift := deadlineFrom(ctx, conn, HandshakeTimeout)
	defer lift()
	if h := time.Now().Add(HelloTimeout); h.Before(dl) {
		_ = conn.SetReadDeadline(h)
	}
	p, err := wire.ReadControl(conn, wire.TypeHello)
	if err != nil {
		return wire.Hello{}, FrameKeys{}, fmt.Errorf("read hello: %w", err)
	}
	_ = conn.SetReadDeadline(dl)
	hello, err := wire.ParseHello(p)
	refuse := func(tell, format string, args ...any) (wire.Hello, FrameKeys, error) {
		v := wire.Verdict{Reason: tell}
		_ = wire.WriteControl(conn, wire.TypeVerdict, v.Marshal())
		return hello, FrameKeys{}, fmt.Errorf("%w: "+format, append([]any{ErrAuth}, args...)...)
	}
	if ve := (*wire.VersionError)(nil); errors.As(err, &ve) {
		// A rank of another release (a Hello of any length that names
		// another version): it is told both version numbers and nothing
		// else, since the versions differ in what follows. The Hello was
		// read into the one small buffer like any other; the refusal
		// is one short frame.
		return refuse(fmt.Sprintf("protocol version %d refused: this rank speaks protocol version %d (ringtail versions differ across ranks; upgrade every rank to the same release)",
			ve.Peer, ve.Local), "%w", ve)
	}
	if err != nil {
		return hello, FrameKeys{}, err
	}
	var ch wire.Challenge
	if _, err := rand.Read(ch.Nonce[:]); err != nil {
		return hello, FrameKeys{}, err
	}
	ch.MAC = mac(id.Secret, "listener", p, ch.Nonce[:])
	if err := wire.WriteControl(conn, wire.TypeChallenge, ch.Marshal()); err != nil {
		return hello, FrameKeys{}, fmt.Errorf("send challenge: %w", err)
	}
	rp, err := wire.ReadControl(conn, wire.TypeResponse)
	if err != nil {
		return hello, FrameKeys{}, fmt.Errorf("read response: %w", err)
	}
	got, err := wire.ParseResponse(rp)
	if err != nil {
		return hello, FrameKeys{}, err
	}
	if want := mac(id.Secret, "dialer", p, ch.Nonce[:]); !hmac.Equal(want[:], got[:]) {
		return refuse("authentication failed", "a dialer claiming rank %d does not know the job secret", hello.Rank)
	}
	// Authenticated: the dialer knows the secret, so it may hear why its
	// call is refused.
	switch {
	case hello.JobTag != id.JobTag():
		return refuse(fmt.Sprintf("wrong job: this is job %q", id.JobID), "dialer is of another job than %q", id.JobID)
	case int(hello.World) != id.World:
		return refuse(fmt.Sprintf("world size %d, this job has %d", hello.World, id.World), "world size %d, this job has %d", hello.World, id.World)
	case int(hello.Peer) != id.Rank:
		return refuse(fmt.Sprintf("dialed rank %d but reached rank %d", hello.Peer, id.Rank), "dialed rank %d but reached rank %d", hello.Peer, id.Rank)
	case hello.Generation != id.Generation:
		return refuse(fmt.Sprintf("generation %d, this rank is at generation %d", hello.Generation, id.Generation),
			"generation %d, this rank is at generation %d", hello.Generation, id.Generation)
	case FrameAuth(hello.Frames) != id.Frames && crossesHost(conn):
		return refuse(fmt.Sprintf("frame protection %v across hosts, this rank uses %v (RINGTAIL_FRAME_AUTH must be the same on every rank)", FrameAuth(hello.Frames), id.Frames),
			"rank %d protects frames across hosts with %v, this rank with %v", hello.Rank, FrameAuth(hello.Frames), id.Frames)
	}
	keys, err := deriveKeys(id.Secret, &hello, &ch.Nonce, false)
	if err != nil {
		return hello, FrameKeys{}, err
	}
	ok := wire.Verdict{OK: true}
	if err := wire.WriteControl(conn, wire.TypeVerdict, ok.Marshal()); err != nil {
		return hello, FrameKeys{}, fmt.Errorf("send verdict: %w", err)
	}
	return hello, keys, nil
}
