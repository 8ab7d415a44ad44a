"""Checks of deploy/'s csi-proxy DaemonSets that a schema cannot make
(scripts/validate-deploy.sh runs it with the venv's PyYAML).

For deploy/linux and deploy/windows: the kustomization's `images:` names the
container's image (no registry.example.com anywhere); the container has
startup, readiness and liveness probes that exec `csi-proxyctl ... status`
with `--timeout=N` below the probe's timeoutSeconds; and
terminationGracePeriodSeconds is -shutdown-timeout plus 1 to 10 s, so the
proxy drains its calls before the kubelet kills it. Rendered kustomize
output given as arguments is checked for the substituted image too.
"""

import re
import sys
from pathlib import Path

import yaml

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
PROBES = ("startupProbe", "readinessProbe", "livenessProbe")
problems = []


def fail(where, what):
    problems.append(f"{where}: {what}")


def seconds(value):
    m = re.fullmatch(r"(\d+)s", value)
    return int(m.group(1)) if m else None


def check_daemonset(where, ds, image_names):
    spec = ds["spec"]["template"]["spec"]
    (container,) = [c for c in spec["containers"] if c["name"] == "csi-proxy"]
    if image_names is not None and container["image"] not in image_names:
        fail(where, f"image {container['image']!r} is not set by the kustomization ({image_names})")
    timeout = None
    for arg in container.get("args", []):
        if arg.startswith("-shutdown-timeout="):
            timeout = seconds(arg.split("=", 1)[1])
    if timeout is None:
        fail(where, "no -shutdown-timeout=<N>s argument")
    grace = spec.get("terminationGracePeriodSeconds")
    if timeout is not None and (grace is None or not 1 <= grace - timeout <= 10):
        fail(where, f"terminationGracePeriodSeconds {grace} does not cover -shutdown-timeout={timeout}s by 1-10 s")
    for name in PROBES:
        probe = container.get(name)
        if probe is None:
            fail(where, f"no {name}")
            continue
        command = probe.get("exec", {}).get("command", [])
        if not any("csi-proxyctl" in c for c in command) or "status" not in command:
            fail(where, f"{name} does not run `csi-proxyctl status`: {command}")
        per_call = [seconds(c.split("=", 1)[1] + "s") for c in command if c.startswith("--timeout=")]
        probe_timeout = probe.get("timeoutSeconds", 1)
        if not per_call or per_call[0] is None or per_call[0] >= probe_timeout:
            fail(where, f"{name}: --timeout must be below timeoutSeconds ({probe_timeout})")


def main():
    for os_dir, manifest in (("linux", "daemonset.yaml"), ("windows", "hostprocess-daemonset.yaml")):
        kustomization = yaml.safe_load((DEPLOY / os_dir / "kustomization.yaml").read_text())
        if manifest not in kustomization.get("resources", []):
            fail(f"deploy/{os_dir}/kustomization.yaml", f"does not list {manifest}")
        images = kustomization.get("images", [])
        names = [i["name"] for i in images]
        if not images or not all(i.get("newName") and i.get("newTag") for i in images):
            fail(f"deploy/{os_dir}/kustomization.yaml", "needs images: with name, newName and newTag")
        (ds,) = [d for d in yaml.safe_load_all((DEPLOY / os_dir / manifest).read_text()) if d]
        check_daemonset(f"deploy/{os_dir}/{manifest}", ds, names)
    for path in sys.argv[1:]:
        for doc in yaml.safe_load_all(Path(path).read_text()):
            if doc and doc.get("kind") == "DaemonSet":
                check_daemonset(path, doc, None)
                image = doc["spec"]["template"]["spec"]["containers"][0]["image"]
                if ":" not in image or "/" not in image:
                    fail(path, f"image {image!r} was not substituted by the kustomization")
    for f in DEPLOY.rglob("*.yaml"):
        if "registry.example.com/csi-proxy" in f.read_text():
            fail(str(f), "names registry.example.com for csi-proxy's image")
    if problems:
        print("\n".join(problems), file=sys.stderr)
        sys.exit(1)
    print("daemonsets: ok")


main()
