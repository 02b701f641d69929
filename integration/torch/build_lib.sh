#!/bin/sh
# Builds libringtail.so (the C ABI, integration/capi) next to the Python
# package, where ringtail_torch looks for it. Run from anywhere; needs Go.
# Symbol tables and DWARF are left out (-s -w): the wheel is half the size.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-$here/ringtail_torch/libringtail.so}
cd "$root"
# go-nvml's cgo declares NVIDIA's deprecated calls: keep gcc quiet about
# them (Go's default CGO_CFLAGS is "-O2 -g").
CGO_CFLAGS=${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}
export CGO_CFLAGS
go build -buildmode=c-shared -ldflags="-s -w" -o "$out" ./integration/capi
rm -f "${out%.so}.h" # the header is include/ringtail.h
echo "built $out"
