#!/usr/bin/env bash
# Builds what ships, into ${CARGO_TARGET_DIR:-target}/ship/:
#   linux/csi-proxy, linux/csi-proxyctl          stripped; debug info in <name>.dwp
#   windows/csi-proxy.exe, windows/csi-proxyctl.exe  stripped; debug info in
#                                                   <name>.exe.debug, named by a
#                                                   .gnu_debuglink section
#   windows/csi_proxy.dll                        library mode (docs/library-mode.md):
#                                                   stripped the same way, debug
#                                                   info in csi_proxy.dll.debug
# The windows-gnu target cannot split debug info itself, so the .exe and the
# .dll are built with it (profile dist-windows) and split here with mingw's
# objcopy.
#   scripts/dist.sh [linux] [windows] [dll]      (none: all three)
set -euo pipefail
cd "$(dirname "$0")/.."

target_dir="${CARGO_TARGET_DIR:-$PWD/target}"
out="$target_dir/ship"
parts=("$@")
[[ ${#parts[@]} -gt 0 ]] || parts=(linux windows dll)
for part in "${parts[@]}"; do
    case "$part" in
        linux | windows | dll) ;;
        *) printf 'dist.sh: unknown part %s (linux, windows, dll)\n' "$part" >&2; exit 2 ;;
    esac
done
want() { [[ " ${parts[*]} " == *" $1 "* ]]; }

# Splits the debug info of the PE file $1 into $1.debug and strips $1.
split_pe() {
    local objcopy=x86_64-w64-mingw32-objcopy
    "$objcopy" --only-keep-debug "$1" "$1.debug"
    "$objcopy" --strip-debug --strip-unneeded --add-gnu-debuglink="$1.debug" "$1"
}

if want linux; then
    mkdir -p "$out/linux"
    # Two builds: one would unify features, and the daemon would be built
    # with the client's (tonic's channel, hyper's HTTP/2 client).
    cargo build --locked --profile dist -p csi-proxy
    cargo build --locked --profile dist -p csi-proxyctl
    for b in csi-proxy csi-proxyctl; do
        cp "$target_dir/dist/$b" "$out/linux/$b"
        if [[ -f "$target_dir/dist/$b.dwp" ]]; then
            cp "$target_dir/dist/$b.dwp" "$out/linux/$b.dwp"
        fi
    done
fi

windows_builds=()
want windows && windows_builds+=(csi-proxy csi-proxyctl)
want dll && windows_builds+=(csi-proxy-ffi)
if [[ ${#windows_builds[@]} -gt 0 ]]; then
    mkdir -p "$out/windows"
    for p in "${windows_builds[@]}"; do
        cargo build --locked --profile dist-windows --target x86_64-pc-windows-gnu -p "$p"
    done
    built="$target_dir/x86_64-pc-windows-gnu/dist-windows"
    if want windows; then
        for b in csi-proxy csi-proxyctl; do
            cp "$built/$b.exe" "$out/windows/$b.exe"
            split_pe "$out/windows/$b.exe"
        done
    fi
    if want dll; then
        cp "$built/csi_proxy.dll" "$out/windows/csi_proxy.dll"
        split_pe "$out/windows/csi_proxy.dll"
    fi
fi

ls -l "$out"/*
