#!/usr/bin/env bash
# Validates the deployment files in deploy/:
#   - every Kubernetes manifest against the API schema of Kubernetes
#     $KUBERNETES_VERSION with kubernetes-validate (PyPI, works offline;
#     installed by scripts/setup.sh into a venv), strict (unknown fields fail);
#   - the systemd unit with `systemd-analyze verify`.
set -euo pipefail
cd "$(dirname "$0")/.."

KUBERNETES_VERSION="${KUBERNETES_VERSION:-1.33.0}"
venv="${CARGO_TARGET_DIR:-$PWD/target}/deploy-venv"

manifests=(deploy/linux/daemonset.yaml deploy/windows/hostprocess-daemonset.yaml
    deploy/kubernetes/csi-node-plugin.yaml)
echo "kubernetes-validate (Kubernetes $KUBERNETES_VERSION, strict): ${manifests[*]}"
"$venv/bin/kubernetes-validate" --strict -k "$KUBERNETES_VERSION" "${manifests[@]}"

# The unit names /usr/local/bin/csi-proxy, which verify checks exists:
# verify a copy pointing at this build's binary.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin="${CARGO_TARGET_DIR:-$PWD/target}/debug/csi-proxy"
[[ -x "$bin" ]] || cargo build --locked -q -p csi-proxy
sed "s|/usr/local/bin/csi-proxy|$bin|" deploy/linux/csi-proxy.service >"$tmp/csi-proxy.service"
echo "systemd-analyze verify deploy/linux/csi-proxy.service"
out=$(systemd-analyze verify "$tmp/csi-proxy.service" 2>&1) || { echo "$out"; exit 1; }
# verify prints problems of other units on the machine too; only ours count.
if grep -F "csi-proxy.service" <<<"$out"; then
    exit 1
fi
echo "deploy files: ok"
