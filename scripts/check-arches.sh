#!/usr/bin/env bash
# Type-checks the Linux crates for the other Linux architectures the proxy
# may run on: a 64-bit ARM, a big-endian, a powerpc (its own ioctl
# direction bits) and a 32-bit target (usize, c_long, rlim_t and the stat
# fields are 32-bit there). `cargo check` only: no linker, no C toolchain
# for these targets is needed. The host library's unit tests are checked
# too (cfg(test)), for the per-architecture ioctl numbers they hold.
# The targets come from scripts/setup.sh (rustup target add).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

targets=(
    aarch64-unknown-linux-gnu
    powerpc64le-unknown-linux-gnu
    s390x-unknown-linux-gnu
    i686-unknown-linux-gnu
)

for target in "${targets[@]}"; do
    echo "== cargo check --target $target"
    cargo check --locked --workspace --lib --bins --target "$target"
    cargo check --locked -p csi-proxy-host --lib --profile test --target "$target"
done
