package bench

import (
	"unsafe"

	"github.com/ringtail-ml/ringtail"
)

func reduceView[T any](b ringtail.Buffer) []T {
	var z T
	n := len(b.Bytes) / int(unsafe.Sizeof(z))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b.Bytes))), n)
}
