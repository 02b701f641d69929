// Package cli gives ringtail's commands one help and error style.
// `--help` prints the command's "Usage: ringtail ..." text, then every flag
// spelled as the README spells it (FlagName: one dash for one-letter flags
// and -np, as mpirun has them; two for the rest) with its value and
// default. A bad flag or value is one line on stderr that names the
// command and what to type instead ("ringtail run: --timeout 5: a
// duration needs a unit: use 5s"), with exit status 2.
//
// It imports nothing of ringtail; cmd/ringtail and cmd/ringtail-train use it.
package cli
