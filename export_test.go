package ringtail

import (
	"io"
	"math"

	"github.com/ringtail-ml/ringtail/internal/envcfg"
	"github.com/ringtail-ml/ringtail/internal/reduce"
)

func f32ToF16(f float32) uint16 { return reduce.F32ToF16(f) }
func f16ToF32(h uint16) float32 { return reduce.F16ToF32(h) }

func viewF32(b Buffer) []float32 {
	out := make([]float32, b.Len())
	for i := range out {
		out[i] = reduce.F16ToF32(0) + float32frombits(b.Bytes[4*i:])
	}
	return out
}

func float32frombits(b []byte) float32 {
	return math.Float32frombits(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24)
}

// configFromEnviron is ConfigFromEnv over environ, logging to out.
func configFromEnviron(environ []string, out io.Writer) (Config, error) {
	c, err := envcfg.FromEnviron(environ, out)
	return Config(c), err
}
