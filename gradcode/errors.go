package gradcode

import "errors"

// ErrInvalidConfig is wrapped by every error caused by a bad Config, a bad
// explicit matrix or bad arguments to a constructor.
var ErrInvalidConfig = errors.New("gradcode: invalid configuration")

// ErrNotDecodable is wrapped when the gradient sum cannot be recovered from
// the given set of workers (too many stragglers, or a straggler pattern the
// plan does not tolerate).
var ErrNotDecodable = errors.New("gradcode: survivors cannot decode the gradient sum")

// ErrBadRanks is wrapped when a list of ranks (survivors, arrivals,
// stragglers) holds an out-of-range or duplicate rank.
var ErrBadRanks = errors.New("gradcode: bad rank list")

// ErrShape is wrapped when a buffer passed to Encode or Combine has the wrong
// length or count.
var ErrShape = errors.New("gradcode: buffer shape mismatch")
