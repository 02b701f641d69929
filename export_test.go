package ringtail

import "github.com/ringtail-ml/ringtail/internal/reduce"

func f32ToF16(f float32) uint16 { return reduce.F32ToF16(f) }
func f16ToF32(h uint16) float32 { return reduce.F16ToF32(h) }
