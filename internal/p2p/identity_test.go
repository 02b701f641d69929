package p2p

import (
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// The derivation is part of the protocol: ranks of different builds must
// compute the same coordinator ID. This pins it. The value was checked
// independently of Go (Python: HKDF-SHA256 by hand with hmac, the Ed25519
// public key from the seed with pyca/cryptography, then the libp2p peer ID:
// base58 of the identity multihash of the protobuf PublicKey{Ed25519, pub}).
func TestCoordinatorIDIsPinned(t *testing.T) {
	id, err := CoordinatorID([]byte("correct horse battery staple"), "job-42")
	if err != nil {
		t.Fatal(err)
	}
	if want := pinnedCoordinatorID; id.String() != want {
		t.Fatalf("coordinator id %s, want %s: the derivation changed", id, want)
	}
}

const pinnedCoordinatorID = "12D3KooWCGqYKY5DvH8H7L7iMHp34NrBgYNwv5Hm2uXSybUjsUEH"

func TestCoordinatorKeyDependsOnSecretAndJob(t *testing.T) {
	base, err := CoordinatorID([]byte("s3cret"), "job")
	if err != nil {
		t.Fatal(err)
	}
	again, _ := CoordinatorID([]byte("s3cret"), "job")
	otherSecret, _ := CoordinatorID([]byte("s3cret!"), "job")
	otherJob, _ := CoordinatorID([]byte("s3cret"), "job2")
	if again != base {
		t.Fatal("derivation is not deterministic")
	}
	if otherSecret == base || otherJob == base || otherSecret == otherJob {
		t.Fatalf("ids collide: %s %s %s", base, otherSecret, otherJob)
	}
	k, _ := CoordinatorKey([]byte("s3cret"), "job")
	if k.Type() != crypto.Ed25519 || !base.MatchesPrivateKey(k) {
		t.Fatalf("key type %v does not match id %s", k.Type(), base)
	}
	if _, err := CoordinatorKey(nil, "job"); err == nil {
		t.Fatal("empty secret accepted")
	}
	if _, err := CoordinatorKey([]byte("s"), ""); err == nil {
		t.Fatal("empty job id accepted")
	}
}

func TestRandomKeysDiffer(t *testing.T) {
	a, err := RandomKey()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := RandomKey()
	ia, _ := peer.IDFromPrivateKey(a)
	ib, _ := peer.IDFromPrivateKey(b)
	if ia == ib || a.Type() != crypto.Ed25519 {
		t.Fatalf("random keys %s %s (%v)", ia, ib, a.Type())
	}
}
