package p2p

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// coordinatorInfo is the HKDF info prefix of the coordinator's key; the job
// id follows it. Changing it changes every coordinator's peer ID.
const coordinatorInfo = "ringtail/p2p/coordinator/v1\x00"

// coordinatorSalt is the fixed HKDF salt (domain separation from every
// other use of the job secret).
const coordinatorSalt = "ringtail/p2p/v1"

// CoordinatorKey derives the coordinator's Ed25519 identity from the job
// secret and job id: seed = HKDF-SHA256(secret, salt, info ‖ jobID). Every
// holder of the secret computes the same key, so the ranks know the
// coordinator's peer ID without an exchange; anyone without the secret
// cannot present it. The secret must have high entropy: the peer ID is
// public, so a guessable secret can be recovered from it offline.
func CoordinatorKey(secret []byte, jobID string) (crypto.PrivKey, error) {
	if len(secret) == 0 {
		return nil, errors.New("p2p: coordinator key needs a job secret")
	}
	if jobID == "" {
		return nil, errors.New("p2p: coordinator key needs a job id")
	}
	seed, err := hkdf.Key(sha256.New, secret, []byte(coordinatorSalt), coordinatorInfo+jobID, ed25519.SeedSize)
	if err != nil {
		return nil, fmt.Errorf("p2p: derive coordinator key: %w", err)
	}
	k, err := crypto.UnmarshalEd25519PrivateKey(ed25519.NewKeyFromSeed(seed))
	if err != nil {
		return nil, fmt.Errorf("p2p: coordinator key: %w", err)
	}
	return k, nil
}

// CoordinatorID is the peer ID of CoordinatorKey(secret, jobID).
func CoordinatorID(secret []byte, jobID string) (peer.ID, error) {
	k, err := CoordinatorKey(secret, jobID)
	if err != nil {
		return "", err
	}
	id, err := peer.IDFromPrivateKey(k)
	if err != nil {
		return "", fmt.Errorf("p2p: coordinator peer id: %w", err)
	}
	return id, nil
}

// RandomKey returns a fresh Ed25519 identity for a rank.
func RandomKey() (crypto.PrivKey, error) {
	k, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("p2p: random key: %w", err)
	}
	return k, nil
}
