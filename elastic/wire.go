package elastic

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ringtail-ml/ringtail/elastic/view"
)

// Messages between workers travel over memberlist (encrypted and
// authenticated with the job key): one type byte, then JSON.
const (
	msgProposal byte = 'P' // a view; also the push/pull state
	msgFailed   byte = 'F' // a generation's communicator failed
)

// maxMessage bounds a decoded message.
const maxMessage = 1 << 20

// failedMsg reports that generation Gen's communicator failed on From,
// naming Blame (a node name) when the failure was a peer's death.
type failedMsg struct {
	Gen   uint64 `json:"gen"`
	From  string `json:"from"`
	Blame string `json:"blame,omitempty"`
}

func encode(kind byte, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("elastic: encoding %T: %v", v, err)) // only our own plain structs
	}
	return append([]byte{kind}, b...)
}

// decode parses a message into a view.View or a failedMsg.
func decode(b []byte) (any, error) {
	if len(b) < 2 || len(b) > maxMessage {
		return nil, fmt.Errorf("elastic: message of %d bytes", len(b))
	}
	switch b[0] {
	case msgProposal:
		var v view.View
		if err := json.Unmarshal(b[1:], &v); err != nil {
			return nil, fmt.Errorf("elastic: proposal: %w", err)
		}
		if err := v.Validate(); err != nil {
			return nil, err
		}
		return v, nil
	case msgFailed:
		var m failedMsg
		if err := json.Unmarshal(b[1:], &m); err != nil {
			return nil, fmt.Errorf("elastic: failure report: %w", err)
		}
		if m.Gen == 0 || m.From == "" {
			return nil, errors.New("elastic: failure report without generation or sender")
		}
		return m, nil
	}
	return nil, fmt.Errorf("elastic: unknown message type %q", b[0])
}
