#!/usr/bin/env bash
# Builds Kubernetes' API-machinery e2e suite (this module's e2e_test.go) into
# bin/conformance/e2e.test for make conformance. Skips the build when the
# binary there was built from this module's current go.mod, go.sum and
# sources (their hash is kept next to it).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dest="$root/bin/conformance"
bin="$dest/e2e.test"

inputs="$(cd "$here" && cat go.mod go.sum ./*.go | sha256sum | cut -d' ' -f1)"
if [[ -x "$bin" && -f "$bin.inputs" && "$(cat "$bin.inputs")" == "$inputs" ]]; then
	echo "conformance: $bin is up to date"
	exit 0
fi

mkdir -p "$dest"
echo "conformance: building $bin; the first build takes about 30 minutes on 2 cores"
start=$SECONDS
(cd "$here" && go test -c -trimpath -o "$bin.tmp" .)
mv "$bin.tmp" "$bin"
echo "$inputs" >"$bin.inputs"
echo "conformance: built $bin in $((SECONDS - start))s"
