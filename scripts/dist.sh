#!/usr/bin/env bash
# Builds what ships, into ${CARGO_TARGET_DIR:-target}/ship/:
#   linux/csi-proxy, linux/csi-proxyctl          stripped; debug info in <name>.dwp
#   windows/csi-proxy.exe, windows/csi-proxyctl.exe  stripped; debug info in
#                                                   <name>.exe.debug, named by a
#                                                   .gnu_debuglink section
# The windows-gnu target cannot split debug info itself, so the .exe is built
# with it (profile dist-windows) and split here with mingw's objcopy.
set -euo pipefail
cd "$(dirname "$0")/.."

target_dir="${CARGO_TARGET_DIR:-$PWD/target}"
out="$target_dir/ship"
mkdir -p "$out/linux" "$out/windows"

cargo build --locked --profile dist -p csi-proxy -p csi-proxyctl
for b in csi-proxy csi-proxyctl; do
    cp "$target_dir/dist/$b" "$out/linux/$b"
    if [[ -f "$target_dir/dist/$b.dwp" ]]; then
        cp "$target_dir/dist/$b.dwp" "$out/linux/$b.dwp"
    fi
done

cargo build --locked --profile dist-windows --target x86_64-pc-windows-gnu -p csi-proxy -p csi-proxyctl
objcopy=x86_64-w64-mingw32-objcopy
for b in csi-proxy csi-proxyctl; do
    exe="$out/windows/$b.exe"
    cp "$target_dir/x86_64-pc-windows-gnu/dist-windows/$b.exe" "$exe"
    "$objcopy" --only-keep-debug "$exe" "$exe.debug"
    "$objcopy" --strip-debug --strip-unneeded --add-gnu-debuglink="$exe.debug" "$exe"
done

ls -l "$out"/linux "$out"/windows
