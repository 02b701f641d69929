// Package assemble puts a communicator's runtime together from its
// validated configuration (envcfg.Comm): the flight recorder, the
// observability recorder (metrics, timeline, NVML), the engine's
// settings and the engine itself, which joins the job (Open); and the
// program a rank would run, for --dump-plan (Program).
//
// It reads no environment variable and declares no setting: those are
// internal/envcfg's. It imports the engine; nothing below the root
// package imports it.
package assemble
