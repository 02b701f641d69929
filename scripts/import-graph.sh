#!/usr/bin/env bash
# scripts/import-graph.sh — the import graph of ringtail's own packages, as
# `go list` shows it: one line per package (test files left out), the
# module's packages it imports. docs/imports.md (linked from docs/design.md, "Dependencies point one
# way") holds its output; re-run it after moving code between packages.
set -euo pipefail
cd "$(dirname "$0")/.."
mod=$(go list -m)
go list -f '{{.ImportPath}}|{{join .Imports " "}}' ./... | awk -F'|' -v mod="$mod" '
function short(p) { if (p == mod) return "ringtail"; sub("^" mod "/", "", p); return p }
{
  out = ""
  n = split($2, imps, " ")
  for (i = 1; i <= n; i++) if (imps[i] == mod || index(imps[i], mod "/") == 1) out = out " " short(imps[i])
  printf "%-26s ▶%s\n", short($1), (out == "" ? " —" : out)
}'
