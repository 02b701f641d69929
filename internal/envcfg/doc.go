// Package envcfg declares a communicator's settings once (Table: field,
// variable, default, reader, check, reference line, Config comment) and
// derives from that table ringtail.Config and Comm (generated, the same
// fields in the same order), the defaults, the reading of the
// environment (FromLookup, with the rank's placement beside it),
// validation, the program builders' settings and docs/settings.md's
// reference. Reader reads typed variables and collects every malformed
// one, so a configuration reports all its problems at once (shared with
// elastic).
//
// It assembles nothing: putting a communicator's runtime together from a
// Comm is internal/assemble's. It must not import internal/engine or
// internal/assemble (the engine holds a Comm in its Settings).
package envcfg
