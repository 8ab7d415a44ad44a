#!/usr/bin/env bash
# Validates the deployment files in deploy/:
#   - every Kubernetes manifest against the API schema of Kubernetes
#     $KUBERNETES_VERSION with kubernetes-validate (PyPI, works offline;
#     installed by scripts/setup.sh into a venv), strict (unknown fields fail),
#     and the same for what deploy/linux and deploy/windows render to with
#     their kustomization.yaml (`kubectl kustomize`, when kubectl is there);
#   - the DaemonSets (scripts/check-daemonsets.py): the image comes from the
#     kustomization's `images:` (no registry.example.com), startup, readiness
#     and liveness probes run `csi-proxyctl status` with a per-call timeout
#     shorter than the probe's, and terminationGracePeriodSeconds covers
#     -shutdown-timeout (by 1 to 10 s);
#   - the systemd units (csi-proxy.service, an instance of csi-proxy@.socket)
#     with `systemd-analyze verify`.
set -euo pipefail
cd "$(dirname "$0")/.."

KUBERNETES_VERSION="${KUBERNETES_VERSION:-1.33.0}"
venv="${CARGO_TARGET_DIR:-$PWD/target}/deploy-venv"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

manifests=(deploy/linux/daemonset.yaml deploy/windows/hostprocess-daemonset.yaml
    deploy/kubernetes/csi-node-plugin.yaml)
rendered=()
if command -v kubectl >/dev/null; then
    for os in linux windows; do
        kubectl kustomize "deploy/$os" >"$tmp/$os-rendered.yaml"
        rendered+=("$tmp/$os-rendered.yaml")
    done
else
    echo "kubectl is not installed: kustomizations checked without rendering them"
fi
echo "kubernetes-validate (Kubernetes $KUBERNETES_VERSION, strict): ${manifests[*]} ${rendered[*]}"
"$venv/bin/kubernetes-validate" --strict -k "$KUBERNETES_VERSION" "${manifests[@]}" "${rendered[@]}"

echo "DaemonSets: image, probes, termination grace"
"$venv/bin/python" scripts/check-daemonsets.py "${rendered[@]}"

# The unit names /usr/local/bin/csi-proxy, which verify checks exists:
# verify a copy pointing at this build's binary.
bin="${CARGO_TARGET_DIR:-$PWD/target}/debug/csi-proxy"
[[ -x "$bin" ]] || cargo build --locked -q -p csi-proxy
sed "s|/usr/local/bin/csi-proxy|$bin|" deploy/linux/csi-proxy.service >"$tmp/csi-proxy.service"
cp deploy/linux/csi-proxy@.socket "$tmp/csi-proxy@filesystem-v1.socket"
echo "systemd-analyze verify deploy/linux/csi-proxy.service deploy/linux/csi-proxy@.socket"
out=$(cd "$tmp" && systemd-analyze verify ./csi-proxy.service ./csi-proxy@filesystem-v1.socket 2>&1) ||
    { echo "$out"; exit 1; }
# verify prints problems of other units on the machine too; only ours count.
if grep -F "csi-proxy" <<<"$out"; then
    exit 1
fi
echo "deploy files: ok"
