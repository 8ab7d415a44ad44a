#!/usr/bin/env bash
# cargo deny's offline checks of deny.toml: licenses, bans (duplicate
# versions, wildcards) and sources (crates.io only). The advisories check
# needs the RustSec database from the network: the GitHub workflow runs it
# (.github/workflows/linux.yml). cargo-deny is installed by scripts/setup.sh
# under ${CARGO_TARGET_DIR:-target}/lint-tools/cargo-deny.
set -euo pipefail
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"
deny="${CARGO_TARGET_DIR:-$repo_root/target}/lint-tools/cargo-deny/bin/cargo-deny"
[[ -x "$deny" ]] || {
    printf 'deny.sh: %s is missing: run scripts/setup.sh\n' "$deny" >&2
    exit 1
}
echo "== $("$deny" --version): licenses, bans, sources (offline)"
"$deny" --offline --locked check licenses bans sources
