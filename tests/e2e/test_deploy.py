"""The Kubernetes manifests under deploy/ (issue 29) and the kubectl plugin: every overlay
builds with kubectl kustomize, every object validates against the Kubernetes API schemas (and
cpg's own CRD schema and lint for its Cilium policies), and every pod meets the restricted Pod
Security Standard."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from cpg_core.lint import lint_text
from cpg_io.crd_schema import crd_schema_errors
from cpg_io.version import cpg_version

ROOT = Path(__file__).resolve().parents[2]
OVERLAYS = sorted(p.name for p in (ROOT / "deploy" / "overlays").iterdir() if p.is_dir())
KUBECTL = shutil.which("kubectl")
KUBERNETES = "1.32"


def _kubectl() -> str:
    if KUBECTL is None:
        if os.environ.get("CI"):
            raise AssertionError("kubectl is needed (Debian's kubernetes-client)")
        pytest.skip("kubectl is not installed (Debian's kubernetes-client)")
    return KUBECTL


def built(overlay: str) -> list[dict[str, Any]]:
    ran = subprocess.run(
        [_kubectl(), "kustomize", str(ROOT / "deploy" / "overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr
    return [doc for doc in yaml.safe_load_all(ran.stdout) if doc]


def pod_specs(objects: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for obj in objects:
        spec = obj.get("spec") or {}
        if obj["kind"] == "CronJob":
            spec = spec["jobTemplate"]["spec"]
        template = spec.get("template")
        if template is not None:
            found.append((f"{obj['kind']}/{obj['metadata']['name']}", template["spec"]))
    return found


def restricted_problems(pod: dict[str, Any]) -> list[str]:
    """What the restricted Pod Security Standard refuses in a pod spec (and what cpg asks
    more: a read-only root filesystem, resource limits)."""
    problems = []
    pod_context = pod.get("securityContext") or {}
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(key):
            problems.append(key)
    for volume in pod.get("volumes") or []:
        if "hostPath" in volume:
            problems.append(f"hostPath volume {volume['name']}")
    for container in [*pod.get("initContainers", []), *pod["containers"]]:
        context = container.get("securityContext") or {}
        name = container["name"]

        def setting(key: str, context: dict[str, Any] = context) -> Any:
            return context.get(key, pod_context.get(key))

        if setting("runAsNonRoot") is not True:
            problems.append(f"{name}: runAsNonRoot is not true")
        if setting("runAsUser") == 0:
            problems.append(f"{name}: runs as root (runAsUser 0)")
        if context.get("privileged"):
            problems.append(f"{name}: privileged")
        if context.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{name}: allowPrivilegeEscalation is not false")
        if "ALL" not in ((context.get("capabilities") or {}).get("drop") or []):
            problems.append(f"{name}: capabilities do not drop ALL")
        if (context.get("capabilities") or {}).get("add"):
            problems.append(f"{name}: adds capabilities")
        seccomp = (setting("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            problems.append(f"{name}: seccompProfile is not RuntimeDefault")
        if context.get("readOnlyRootFilesystem") is not True:
            problems.append(f"{name}: root filesystem is writable")
        limits = (container.get("resources") or {}).get("limits") or {}
        if not {"cpu", "memory"} <= set(limits):
            problems.append(f"{name}: no cpu and memory limits")
    return problems


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_overlay_builds_and_validates(overlay: str) -> None:
    import kubernetes_validate

    objects = built(overlay)
    kinds = {obj["kind"] for obj in objects}
    assert {"Namespace", "ServiceAccount", "PersistentVolumeClaim", "CiliumNetworkPolicy"} <= kinds
    for obj in objects:
        assert obj["metadata"].get("namespace") in ("cpg", None), obj["metadata"]
        if obj["kind"] == "CiliumNetworkPolicy":
            assert not crd_schema_errors(obj), obj["metadata"]["name"]
            findings = lint_text(yaml.safe_dump(obj), obj["metadata"]["name"])
            assert not findings, [f"{f.code} {f.message}" for f in findings]
            continue
        kubernetes_validate.validate(obj, KUBERNETES, strict=True)
    specs = pod_specs(objects)
    assert specs, "every overlay runs cpg somewhere"
    for where, pod in specs:
        assert not restricted_problems(pod), (where, restricted_problems(pod))
        for container in pod["containers"]:  # the image this version builds (make image)
            args = container["args"]
            flavour = "-propose" if args[0] == "propose" else ""  # TARGET=propose: git
            flavour += "-s3" if any("s3://" in a for a in args) else ""  # EXTRAS=s3
            assert container["image"] == f"localhost/cpg:{cpg_version()}{flavour}"


def test_each_overlay_runs_what_it_says() -> None:
    live = {o["kind"]: o for o in built("live")}
    args = live["Deployment"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[0] == "generate" and "--output-dir=/data/policies" in args
    assert live["ServiceAccount"]["automountServiceAccountToken"] is False
    assert "Role" not in live and "ClusterRole" not in live  # no API access at all
    tls = {o["kind"]: o for o in built("live-tls")}["Deployment"]
    assert (
        "--tls-ca-cert=/etc/hubble-tls/ca.crt"
        in tls["spec"]["template"]["spec"]["containers"][0]["args"]
    )
    dedup = built("cluster-dedup")
    (role,) = [o for o in dedup if o["kind"] == "ClusterRole"]
    assert {verb for rule in role["rules"] for verb in rule["verbs"]} == {"get", "list"}
    readable = {r for rule in role["rules"] for r in rule["resources"]}
    assert {"ciliumendpoints", "ciliumidentities", "pods"} <= readable  # --identities=cluster
    (deployment,) = [o for o in dedup if o["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    assert {"--cluster-dedup", "--identities=cluster"} <= set(pod["containers"][0]["args"])
    assert pod["automountServiceAccountToken"] is True  # the API through its service account
    archive = {o["kind"] for o in built("archive")}
    assert "CronJob" in archive and "Deployment" not in archive
    propose = [o for o in built("propose") if o["kind"] == "CronJob"]
    assert (
        propose[0]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"][0]
        == "propose"
    )


def test_a_container_as_root_or_with_a_writable_root_is_refused() -> None:
    """The check the overlays pass fails on what the issue forbids (mutated copies)."""
    (_, pod) = pod_specs(built("live"))[0]
    as_root = yaml.safe_load(yaml.safe_dump(pod))
    as_root["securityContext"]["runAsUser"] = 0
    as_root["securityContext"]["runAsNonRoot"] = False
    as_root["containers"][0]["securityContext"]["runAsNonRoot"] = False
    assert any("root" in p for p in restricted_problems(as_root))
    writable = yaml.safe_load(yaml.safe_dump(pod))
    writable["containers"][0]["securityContext"]["readOnlyRootFilesystem"] = False
    assert restricted_problems(writable) == ["cpg: root filesystem is writable"]


def test_kubectl_finds_the_cpg_plugin(tmp_path: Path) -> None:
    kubectl = _kubectl()
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    env["KUBECONFIG"] = str(tmp_path / "none")
    listed = subprocess.run(
        [kubectl, "plugin", "list"], capture_output=True, text=True, env=env, timeout=60
    )
    assert "kubectl-cpg" in listed.stdout, listed.stdout + listed.stderr
    ran = subprocess.run(
        [kubectl, "cpg", "version"], capture_output=True, text=True, env=env, timeout=60
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith("cpg ")


def test_every_version_the_docs_name_is_this_version() -> None:
    """A release changes the version in pyproject; the changelog's newest release, the image
    tags and the pins people copy follow it."""
    tag = re.compile(r"localhost/cpg:(\d+\.\d+\.\d+)")
    places = [ROOT / "README.md", ROOT / "docs" / "in-cluster.md"]
    places += sorted((ROOT / "deploy").rglob("*.yaml"))
    named = {
        f"{path.relative_to(ROOT)}: {found}"
        for path in places
        for found in tag.findall(path.read_text())
        if found != cpg_version()
    }
    assert not named, f"tags other than {cpg_version()}: {sorted(named)}"
    kustomized = re.compile(r'newTag: "(\d+\.\d+\.\d+)')
    stale = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "deploy").rglob("kustomization.yaml"))
        for found in kustomized.findall(path.read_text())
        if found != cpg_version()
    ]
    assert not stale, stale
    changelog = (ROOT / "CHANGELOG.md").read_text()
    released = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}$", changelog, re.M)
    assert released and released[0] == cpg_version(), "the newest release is this version"
    docs = [ROOT / "docs" / "scale-out.md"]
    pinned = {v for path in docs for v in re.findall(r"cpg\[[\w,]+\]==([\d.]+)", path.read_text())}
    assert pinned <= {cpg_version()}, pinned
