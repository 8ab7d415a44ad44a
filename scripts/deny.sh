#!/usr/bin/env bash
# cargo deny's offline checks of deny.toml: licenses, bans (duplicate
# versions, wildcards) and sources (crates.io only). The advisories check
# needs the RustSec database from the network: the GitHub workflow runs it
# (.github/workflows/linux.yml). cargo-deny is installed by scripts/setup.sh
# under ${CSI_PROXY_TOOLS:-$HOME/.cache/csi-proxy-tools}/cargo-deny-<version>.
set -euo pipefail
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"
version=$(sed -n 's/^cargo_deny_version=//p' scripts/setup.sh)
deny="${CSI_PROXY_TOOLS:-$HOME/.cache/csi-proxy-tools}/cargo-deny-$version/bin/cargo-deny"
[[ -x "$deny" ]] || {
    printf 'deny.sh: %s is missing: run scripts/setup.sh\n' "$deny" >&2
    exit 1
}
# cargo metadata reads the manifest of every crate of Cargo.lock, for every
# platform: fetch the ones the builds did not (a no-op once cached); the
# check itself then runs offline.
cargo fetch --locked --quiet
echo "== $("$deny" --version): licenses, bans, sources (offline)"
"$deny" --offline --locked check licenses bans sources
