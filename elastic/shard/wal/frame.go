package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// On-disk frame: little-endian uint32 payload length, little-endian uint32
// CRC-32C of the payload, then the payload (JSON). Both the log records
// and the snapshot file use it.
const headerLen = 8

// MaxRecordLen bounds one log record's payload.
const MaxRecordLen = 64 << 10

// maxSnapshotLen bounds the snapshot payload.
const maxSnapshotLen = 1 << 30

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errTorn reports a frame cut short or failing its checksum.
var errTorn = errors.New("torn or corrupt frame")

// appendFrame returns buf with payload framed.
func appendFrame(buf, payload []byte) []byte {
	var h [headerLen]byte
	binary.LittleEndian.PutUint32(h[0:4], uint32(len(payload)))
	binary.LittleEndian.PutUint32(h[4:8], crc32.Checksum(payload, castagnoli))
	return append(append(buf, h[:]...), payload...)
}

// readFrame decodes the frame at the start of b, returning the payload and
// the frame's total length, or errTorn (b ended early, the length exceeds
// limit, or the checksum fails) or io.EOF (b is empty).
func readFrame(b []byte, limit int) ([]byte, int, error) {
	if len(b) == 0 {
		return nil, 0, io.EOF
	}
	if len(b) < headerLen {
		return nil, 0, fmt.Errorf("%w: %d-byte header fragment", errTorn, len(b))
	}
	n := int(binary.LittleEndian.Uint32(b[0:4]))
	if n > limit {
		return nil, 0, fmt.Errorf("%w: length %d exceeds %d", errTorn, n, limit)
	}
	if len(b) < headerLen+n {
		return nil, 0, fmt.Errorf("%w: payload of %d bytes cut at %d", errTorn, n, len(b)-headerLen)
	}
	p := b[headerLen : headerLen+n]
	if crc32.Checksum(p, castagnoli) != binary.LittleEndian.Uint32(b[4:8]) {
		return nil, 0, fmt.Errorf("%w: checksum mismatch", errTorn)
	}
	return p, headerLen + n, nil
}
