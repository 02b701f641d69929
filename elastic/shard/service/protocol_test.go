package service

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"testing"

	"github.com/ringtail-ml/ringtail/elastic/shard"
)

func TestFrame_RoundTripAndLengthLimit(t *testing.T) {
	var buf bytes.Buffer
	in := request{ID: 7, Op: opDone, Worker: "w1", Shard: 42}
	if err := writeMsg(&buf, in); err != nil {
		t.Fatal(err)
	}
	if n := binary.BigEndian.Uint32(buf.Bytes()[:4]); int(n) != buf.Len()-4 {
		t.Fatalf("length prefix %d for %d payload bytes", n, buf.Len()-4)
	}
	var out request
	if err := readMsg(&buf, &out); err != nil || out != in {
		t.Fatalf("read %+v, %v; want %+v", out, err, in)
	}

	var huge bytes.Buffer
	binary.Write(&huge, binary.BigEndian, uint32(MaxFrameLen+1))
	if err := readMsg(&huge, &out); !errors.Is(err, ErrProtocol) {
		t.Fatalf("oversized frame: err = %v, want ErrProtocol", err)
	}
	if err := writeMsg(&buf, request{Worker: string(make([]byte, MaxFrameLen))}); !errors.Is(err, ErrProtocol) {
		t.Fatalf("oversized write: err = %v, want ErrProtocol", err)
	}
	garbage := append([]byte{0, 0, 0, 3}, "{x}"...)
	if err := readMsg(bytes.NewReader(garbage), &out); !errors.Is(err, ErrProtocol) {
		t.Fatalf("bad JSON: err = %v, want ErrProtocol", err)
	}
}

func handshakePair(clientSecret, serverSecret []byte) (clientErr, serverErr error) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	done := make(chan error, 1)
	go func() {
		err := serverHandshake(b, serverSecret, func() error { return nil })
		b.Close()
		done <- err
	}()
	clientErr = clientHandshake(a, clientSecret)
	a.Close()
	return clientErr, <-done
}

func TestHandshake_MutualHMACChallengeResponse(t *testing.T) {
	secret := []byte("0123456789abcdef-job-secret")
	if c, s := handshakePair(secret, secret); c != nil || s != nil {
		t.Fatalf("same secret: client %v, server %v", c, s)
	}
	other := []byte("0123456789abcdef-job-secreT")
	c, s := handshakePair(other, secret)
	if !errors.Is(c, ErrAuth) || !errors.Is(s, ErrAuth) {
		t.Fatalf("different secrets: client %v, server %v; both want ErrAuth", c, s)
	}
}

// Proofs bind both nonces and the role: a server proof is never a valid
// client proof for the same nonces.
func TestProof_BindsRoleAndNonces(t *testing.T) {
	k := []byte("0123456789abcdef")
	n1, n2 := bytes.Repeat([]byte{1}, nonceLen), bytes.Repeat([]byte{2}, nonceLen)
	if bytes.Equal(proof(k, "server", n1, n2), proof(k, "client", n1, n2)) {
		t.Fatal("roles not separated")
	}
	if bytes.Equal(proof(k, "client", n1, n2), proof(k, "client", n2, n1)) {
		t.Fatal("nonce order not bound")
	}
}

func TestWireErrors_MapBackToSentinels(t *testing.T) {
	for _, want := range []error{shard.ErrNoShard, shard.ErrFinished, shard.ErrUnknownShard, shard.ErrNotOwner, shard.ErrInvalidCommand, ErrUnavailable} {
		got := fromWire(toWire(want))
		if !errors.Is(got, want) {
			t.Errorf("%v came back as %v", want, got)
		}
	}
	if got := fromWire(toWire(errors.New("disk on fire"))); got == nil || errors.Is(got, shard.ErrNoShard) {
		t.Errorf("internal error mapped to %v", got)
	}
}
