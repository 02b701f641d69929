package transport

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"net"

	"golang.org/x/crypto/chacha20poly1305"
	"golang.org/x/sys/cpu"

	"github.com/ringtail-ml/ringtail/internal/wire"
)

// FrameAuth says how the frames of a link that crosses hosts (TCP) are
// protected after the handshake. Links within a host (unix sockets,
// shared memory, fastboxes) and the libp2p data plane (which has its own
// encryption) are never sealed, whatever it says.
type FrameAuth uint8

// Frame protections. The values travel in the Hello; do not reorder.
const (
	// FrameAuthTag appends an AEAD tag to every frame that covers its
	// header and payload (the payload travels in the clear): a frame
	// changed, replayed, reordered, dropped or cut on the path fails its
	// check. The default.
	FrameAuthTag FrameAuth = iota
	// FrameAuthOff sends frames as they are (trusted networks).
	FrameAuthOff
	// FrameAuthEncrypt also encrypts every payload.
	FrameAuthEncrypt
	maxFrameAuth = FrameAuthEncrypt
)

func (f FrameAuth) String() string {
	switch f {
	case FrameAuthTag:
		return "integrity"
	case FrameAuthOff:
		return "off"
	case FrameAuthEncrypt:
		return "encryption"
	}
	return fmt.Sprintf("frame-auth(%d)", uint8(f))
}

// Valid reports whether f is a known protection.
func (f FrameAuth) Valid() bool { return f <= maxFrameAuth }

// TagSize is the size of the AEAD tag that follows a sealed frame's
// payload (AES-GCM and ChaCha20-Poly1305 both have 16-byte tags).
const TagSize = 16

// ErrIntegrity is wrapped by the error of a frame that failed its check.
var ErrIntegrity = errors.New("frame failed its integrity check")

// IntegrityError is the cause (Error.Err) of a failure on a sealed link: a
// frame failed its check, so it was changed, replayed, reordered, dropped
// or cut on the path between the hosts, and nothing of it was applied.
// It names the link both ways.
type IntegrityError struct {
	Local, Peer, Channel int
	// LocalAddr and PeerAddr are the connection's two ends.
	LocalAddr, PeerAddr string
	// Frame is the frame's number in its direction of the link (0 is
	// the first frame after the handshake).
	Frame uint64
	// Why says what failed ("tag mismatch", a header that does not
	// parse, or a length the peer cannot have sent).
	Why string
	// Unread: the frame's header declared a length that the peer's
	// writer cannot have sent (more than remains of the message it
	// continues), so the frame was refused at once, unread, instead of
	// waiting for bytes that would never come; its tag was not checked.
	Unread bool
}

func (e *IntegrityError) Error() string {
	if e.Unread {
		return fmt.Sprintf("frame %d from rank %d to rank %d on channel %d (%s -> %s) was refused unread (%s): its length was changed on the path between the hosts; nothing of it was applied",
			e.Frame, e.Peer, e.Local, e.Channel, e.PeerAddr, e.LocalAddr, e.Why)
	}
	return fmt.Sprintf("frame %d from rank %d to rank %d on channel %d (%s -> %s) failed its integrity check (%s): changed on the path between the hosts; nothing of it was applied",
		e.Frame, e.Peer, e.Local, e.Channel, e.PeerAddr, e.LocalAddr, e.Why)
}

// Unwrap makes errors.Is(err, ErrIntegrity) hold.
func (e *IntegrityError) Unwrap() error { return ErrIntegrity }

// FrameKeys are the keys of a link's two directions, derived in the
// handshake (see deriveKeys), and the protection both ends agreed on.
type FrameKeys struct {
	mode       FrameAuth
	send, recv [32]byte
}

// deriveKeys derives the keys of the link between a dialer and a listener
// with HKDF-SHA256: the job secret is the input key material, both
// handshake nonces the salt (fresh per connection, so a new link has new
// keys), and the info names the protocol, the job tag, the generation,
// both ranks, the channel, the protection and the direction, so no two
// directions or links share a key.
func deriveKeys(secret []byte, hello *wire.Hello, listenerNonce *[wire.NonceSize]byte, dialer bool) (FrameKeys, error) {
	salt := make([]byte, 0, 2*wire.NonceSize)
	salt = append(append(salt, hello.Nonce[:]...), listenerNonce[:]...)
	key := func(dir byte) ([32]byte, error) {
		var out [32]byte
		info := make([]byte, 0, 64)
		info = append(info, "ringtail/v3/frames\x00"...)
		info = append(info, hello.JobTag[:]...)
		info = binary.LittleEndian.AppendUint64(info, hello.Generation)
		info = binary.LittleEndian.AppendUint32(info, hello.Rank)
		info = binary.LittleEndian.AppendUint32(info, hello.Peer)
		info = binary.LittleEndian.AppendUint16(info, hello.Channel)
		info = append(info, byte(hello.Frames), dir)
		k, err := hkdf.Key(sha256.New, secret, salt, string(info), len(out))
		copy(out[:], k)
		return out, err
	}
	toListener, err := key('L')
	if err != nil {
		return FrameKeys{}, err
	}
	toDialer, err := key('D')
	if err != nil {
		return FrameKeys{}, err
	}
	k := FrameKeys{mode: FrameAuth(hello.Frames)}
	if dialer {
		k.send, k.recv = toListener, toDialer
	} else {
		k.send, k.recv = toDialer, toListener
	}
	return k, nil
}

// crossesHost reports whether frames on c leave the host: a TCP
// connection (unix sockets and shared memory stay on it; libp2p streams
// and the in-memory network are never sealed).
func crossesHost(c net.Conn) bool {
	_, ok := c.(*net.TCPConn)
	return ok
}

// newAEAD returns the AEAD of one key: AES-256-GCM where the CPU has AES
// and carry-less multiplication instructions, else ChaCha20-Poly1305.
func newAEAD(key *[32]byte) (cipher.AEAD, error) {
	if cpu.X86.HasAES && cpu.X86.HasPCLMULQDQ || cpu.ARM64.HasAES && cpu.ARM64.HasPMULL {
		b, err := aes.NewCipher(key[:])
		if err != nil {
			return nil, err
		}
		return cipher.NewGCM(b)
	}
	return chacha20poly1305.New(key[:])
}

// sealer is one direction of a sealed link: the writer's, used under the
// link's write lock, or the reader's, used by its reader goroutine alone.
// Frame i of the direction uses nonce i (a 64-bit counter: never repeated
// under one key, and a replayed, reordered or dropped frame is checked
// against the wrong nonce and fails).
//
// The tag covers the header and the payload without copying either: with
// integrity only, the header is sealed as the AEAD's plaintext and the
// payload is its additional data; the header's ciphertext is thrown away
// (the header travels in the clear) and only the tag is sent. The
// receiver seals the header it read in the same way and compares the
// tags, so the check is GCM's (or Poly1305's) own over (payload, header),
// and the payload is hashed where it lies. With encryption the payload is
// the plaintext and the header the additional data.
type sealer struct {
	aead    cipher.AEAD
	encrypt bool
	ctr     uint64
	nonce   [12]byte
	out     []byte // the sealed header and tag, or the sealed payload
}

func newSealer(key *[32]byte, encrypt bool) (*sealer, error) {
	a, err := newAEAD(key)
	if err != nil {
		return nil, err
	}
	if a.Overhead() != TagSize || a.NonceSize() != 12 {
		return nil, fmt.Errorf("transport: AEAD with a %d-byte tag and %d-byte nonce", a.Overhead(), a.NonceSize())
	}
	return &sealer{aead: a, encrypt: encrypt, out: make([]byte, 0, wire.HeaderSize+TagSize)}, nil
}

// next returns the nonce of the next frame and counts it.
func (s *sealer) next() []byte {
	binary.LittleEndian.PutUint64(s.nonce[4:], s.ctr)
	s.ctr++
	return s.nonce[:]
}

// seal returns what follows header on the wire: the tag alone (payload
// sent as it is, second result true), or the encrypted payload and its
// tag (second result false: send it instead of the payload). The slice
// is valid until the next seal.
func (s *sealer) seal(header, payload []byte) ([]byte, bool) {
	nonce := s.next()
	if s.encrypt {
		if need := len(payload) + TagSize; cap(s.out) < need {
			s.out = make([]byte, 0, need)
		}
		s.out = s.aead.Seal(s.out[:0], nonce, payload, header)
		return s.out, false
	}
	s.out = s.aead.Seal(s.out[:0], nonce, header, payload)
	return s.out[len(header):], true
}

// open checks a frame: sealed holds the payload as it came (plain, or
// encrypted) followed by the tag. It returns the plain payload (in
// sealed's memory) or false when the frame fails its check.
func (s *sealer) open(header, sealed []byte) ([]byte, bool) {
	nonce := s.next()
	if len(sealed) < TagSize {
		return nil, false
	}
	if s.encrypt {
		p, err := s.aead.Open(sealed[:0], nonce, sealed, header)
		return p, err == nil
	}
	n := len(sealed) - TagSize
	s.out = s.aead.Seal(s.out[:0], nonce, header, sealed[:n])
	return sealed[:n], subtle.ConstantTimeCompare(s.out[len(header):], sealed[n:]) == 1
}
