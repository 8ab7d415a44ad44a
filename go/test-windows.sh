#!/usr/bin/env bash
# The Go library tests for Windows, under wine, against csi_proxy.dll:
#   go/test-windows.sh [go test flags...]
# Builds the DLL (cargo, x86_64-pc-windows-gnu), the test binaries of
# csiproxy, csiproxy/upstream and internal/tempdir (GOOS=windows
# CGO_ENABLED=0 go test -c with Debian's Go, scripts/go.sh; module mode with
# no dependencies, nothing downloaded) and runs them through
# scripts/wine-run.sh with CSI_PROXY_DLL naming the DLL. The tests' temp dirs
# are removed by internal/tempdir's own walk: wine 8 cannot run a newer Go's
# os.RemoveAll. On Linux itself, `go test ./...` in go/ runs the codec,
# error, method-set and tempdir tests.
# RELEASE=1 builds the DLL optimised (for crates/csi-proxy/benches/pipes.rs,
# which runs the test binary's TestBench mode beside the pipe client). The
# DLL is copied beside the test binaries, where Windows looks first.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
target_dir="${CARGO_TARGET_DIR:-$repo/target}"
profile=debug
[[ -n "${RELEASE:-}" ]] && profile=release
cargo build --locked -q -p csi-proxy-ffi --target x86_64-pc-windows-gnu ${RELEASE:+--release}
out="$target_dir/x86_64-pc-windows-gnu/tmp/go-library"
mkdir -p "$out"
cp -f "$target_dir/x86_64-pc-windows-gnu/$profile/csi_proxy.dll" "$out/csi_proxy.dll"
export CSI_PROXY_DLL
CSI_PROXY_DLL=$(winepath -w "$out/csi_proxy.dll" 2>/dev/null)
for pkg in csiproxy csiproxy/upstream internal/tempdir; do
    exe="$out/${pkg//\//-}.test.exe"
    (cd go && GOOS=windows GOARCH=amd64 CGO_ENABLED=0 GOFLAGS=-mod=mod GOPROXY=off \
        GOCACHE="$target_dir/tmp/go-library-cache" \
        "$repo/scripts/go.sh" test -c -o "$exe" "./$pkg")
    scripts/wine-run.sh "$exe" -test.v "$@"
done
