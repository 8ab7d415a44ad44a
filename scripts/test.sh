#!/usr/bin/env bash
# Runs the whole test suite on this machine:
#   1. set-up (idempotent; installs what is missing: see scripts/setup.sh),
#   2. Linux: unit, property and integration tests (the integration tests
#      start the real csi-proxy binary and talk to it over its Unix sockets),
#   3. deploy/: manifests against the Kubernetes API schema, the systemd unit,
#   4. Windows tier: the same crates cross-built for x86_64-pc-windows-gnu and
#      run under wine, including the Filesystem API over real named pipes,
#   5. the Go library (go/) on Linux and, against the DLL, under wine.
# Every Go step runs Debian's Go through scripts/go.sh, whatever `go` comes
# first on PATH: a `go` and a `gofmt` put first on PATH here only fail, so a
# step that runs PATH's Go instead fails the suite.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh

export WINEPREFIX="${WINEPREFIX:-$HOME/.wine-csi-proxy}"
export WINEDEBUG=-all

echo "== Go toolchain: $(scripts/go.sh --which)"
path_go="${CARGO_TARGET_DIR:-$PWD/target}/tmp/path-go"
mkdir -p "$path_go"
for tool in go gofmt; do
    printf '#!/bin/sh\necho "%s from PATH ran ($0 $*): the suite runs Go through scripts/go.sh" >&2\nexit 1\n' \
        "$tool" >"$path_go/$tool"
    chmod +x "$path_go/$tool"
done
export PATH="$path_go:$PATH"

echo "== Linux tests"
cargo test --workspace --locked

echo "== Library mode: the Disk/Volume life cycle in-process (needs root; skips otherwise)"
cargo run --locked -q -p csi-proxy-host --example library_mode

echo "== Deployment files (kubernetes-validate, systemd-analyze verify)"
scripts/validate-deploy.sh

echo "== Windows layouts parse/nvme.rs writes out, against the mingw-w64 headers"
scripts/check-nvme-layouts.sh

echo "== Windows tests under wine"
# The Go client of tests/go_client_pipes.rs: go cannot run inside wine.
compat/go/build.sh windows
cargo test --workspace --locked --target x86_64-pc-windows-gnu

echo "== Library mode for Go (go/): codec and method sets on Linux, the DLL under wine"
unformatted=$("$(scripts/go.sh env GOROOT)/bin/gofmt" -l go)
[[ -z "$unformatted" ]] || { printf 'gofmt needed: %s\n' "$unformatted" >&2; exit 1; }
(cd go && GOFLAGS=-mod=mod GOPROXY=off CGO_ENABLED=0 GOCACHE="${CARGO_TARGET_DIR:-$PWD/../target}/tmp/go-library-cache" ../scripts/go.sh vet ./... && \
    GOFLAGS=-mod=mod GOPROXY=off CGO_ENABLED=0 GOCACHE="${CARGO_TARGET_DIR:-$PWD/../target}/tmp/go-library-cache" ../scripts/go.sh test ./...)
go/test-windows.sh
