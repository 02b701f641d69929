package balance

import "errors"

// ErrInfeasible is wrapped by every error that reports a problem with no
// solution under its constraints (for example a global batch larger than the
// sum of the ranks' maximum batches). Callers branch on it with errors.Is.
var ErrInfeasible = errors.New("balance: infeasible")

// ErrInvalidInput is wrapped by every error that reports malformed input
// (negative speeds, mismatched lengths, NaN, ...). Callers branch on it with
// errors.Is.
var ErrInvalidInput = errors.New("balance: invalid input")
