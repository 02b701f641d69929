// Package logging builds the one zerolog.Logger every ringtail binary and
// the C API use, from the environment:
//
//   - RINGTAIL_LOG_LEVEL: trace, debug, info, warn or error (default warn,
//     so refused connections and other warnings show by default), or off;
//   - RINGTAIL_LOG_FORMAT: json (one object a line, for machines) or
//     console (for humans); by default console when the output is a
//     terminal and JSON otherwise.
//
// It also owns Limited, which rate-limits a repeated warning (a refused
// connection during a flood) while still counting every occurrence.
//
// This package holds no package-level mutable state (it never touches
// zerolog's global level); it imports nothing of ringtail's.
package logging
