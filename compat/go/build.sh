#!/usr/bin/env bash
# Builds the Go compatibility client with Debian's Go (scripts/go.sh, never
# the `go` on PATH) in GOPATH mode against Debian's packaged grpc-go
# (scripts/setup.sh installs them):
#   compat/go/build.sh [linux|windows]     (default: linux)
# Output, in the CARGO_TARGET_TMPDIR of the integration tests built for that
# OS (target/tmp for the host, target/x86_64-pc-windows-gnu/tmp for Windows):
#   ${CARGO_TARGET_DIR:-target}/tmp/go-check/linux/csi-proxy-go-check
#   ${CARGO_TARGET_DIR:-target}/x86_64-pc-windows-gnu/tmp/go-check/windows/csi-proxy-go-check.exe
# The Linux test
# (crates/csi-proxy/tests/go_client.rs) builds its own copy; the Windows test
# (go_client_pipes.rs, run under wine, where `go` cannot run) needs
# `compat/go/build.sh windows` first: scripts/test.sh does that.
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo_root"

os=${1:-linux}
target_dir="${CARGO_TARGET_DIR:-$repo_root/target}"
case "$os" in
    linux)
        out="$target_dir/tmp/go-check/linux/csi-proxy-go-check"
        goenv=(-u GOOS -u GOARCH)
        ;;
    windows)
        out="$target_dir/x86_64-pc-windows-gnu/tmp/go-check/windows/csi-proxy-go-check.exe"
        goenv=(GOOS=windows GOARCH=amd64)
        ;;
    *)
        printf 'usage: %s [linux|windows]\n' "$0" >&2
        exit 2
        ;;
esac
mkdir -p "$(dirname "$out")"

# Built under a private name, then renamed: a running test may be using the
# previous build.
env "${goenv[@]}" GO111MODULE=off GOPATH="/usr/share/gocode${GOPATH:+:$GOPATH}" GOFLAGS= \
    GOCACHE="$target_dir/tmp/go-check/cache" CGO_ENABLED=0 \
    scripts/go.sh build -o "$out.$$.tmp" ./compat/go/csi-proxy-go-check
mv -f "$out.$$.tmp" "$out"
printf '%s\n' "$out"
