#!/usr/bin/env bash
# Cargo runner for the x86_64-pc-windows-gnu target (.cargo/config.toml):
#   wine-run.sh <program.exe> [args...]
# Runs the program under wine in the project's prefix and exits with its exit
# status. Keeps one persistent wineserver per prefix running (stop it with
# `WINEPREFIX=... wineserver -k`; .ci/run does): without it every process
# start pays ~0.5 s for a new wineserver, and harnesses that capture output
# wait for (or report as leaked) the wineserver that inherited their pipes.
set -euo pipefail

export WINEPREFIX="${WINEPREFIX:-$HOME/.wine-csi-proxy}"
export WINEDEBUG="${WINEDEBUG:--all}"

die() {
    printf 'wine-run.sh: %s\n' "$*" >&2
    exit 127
}

(($# > 0)) || die "usage: wine-run.sh <program.exe> [args...]"
command -v wine >/dev/null || die "wine is not installed: run scripts/setup.sh"
[[ -f "$WINEPREFIX/system.reg" ]] ||
    die "no wine prefix at $WINEPREFIX: run scripts/setup.sh"
[[ -f "$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll" ]] ||
    die "the ProcessPrng shim is missing from $WINEPREFIX (Rust programs cannot start): run scripts/setup.sh"

# Starts the persistent server, or exits at once if one already runs for this
# prefix. Its standard streams must not be ours: it outlives this process.
wineserver -p </dev/null >/dev/null 2>&1 || true

exec wine "$@"
