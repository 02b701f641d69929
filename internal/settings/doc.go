// Package settings is the one table of the RINGTAIL_* environment
// variables the project reads or sets (Known), and the rules every
// reader of them shares: booleans parse one way (ParseBool), a job
// secret has at least MinSecretLen bytes (CheckSecret), and a RINGTAIL_*
// name the table does not hold is a misspelling to warn about, naming
// the nearest known name (Unknown).
//
// It imports nothing of ringtail's, so every package (nvml's tests
// included) can use it; it holds no package-level mutable state.
package settings
