// Package settings is the table of the RINGTAIL_* environment variables
// the project reads or sets besides a communicator's own (Known; those
// are declared in internal/envcfg's Table), and the rules every
// reader of them shares: booleans parse one way (ParseBool), a job
// secret has at least MinSecretLen bytes (CheckSecret), and a RINGTAIL_*
// name neither table holds is a misspelling to warn about, naming
// the nearest known name (Unknown).
//
// It imports nothing of ringtail's, so every package (nvml's tests
// included) can use it; it holds no package-level mutable state.
package settings
