"""The Kubernetes manifests under deploy/ (issue 29) and the kubectl plugin: every overlay
builds with kubectl kustomize, every object validates against the Kubernetes API schemas (and
cpg's own CRD schema and lint for its Cilium policies), and every pod meets the restricted Pod
Security Standard."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from cpg_core.lint import lint_text
from cpg_io.crd_schema import crd_schema_errors
from cpg_io.version import cpg_version

ROOT = Path(__file__).resolve().parents[2]
OVERLAYS = sorted(p.name for p in (ROOT / "deploy" / "overlays").iterdir() if p.is_dir())
KUBECTL = shutil.which("kubectl")
KUBERNETES = "1.32"
CRD_SCHEMAS = {  # the Prometheus Operator's and cert-manager's CRDs the overlays use
    kind: json.loads((ROOT / "tests" / "fixtures" / "crds" / f"{kind.lower()}-v1.json").read_text())
    for kind in ("ServiceMonitor", "PrometheusRule", "Certificate")
}
CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "Namespace"}


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
    assert {"ServiceAccount", "CiliumNetworkPolicy", "Service"} <= kinds
    # the namespace and the volume are deploy/storage's: deleting an overlay keeps the data
    assert not {"Namespace", "PersistentVolumeClaim"} & kinds
    for obj in objects:  # kubectl apply -k puts nothing in the context's own namespace
        expected = None if obj["kind"] in CLUSTER_SCOPED else "cpg"
        assert obj["metadata"].get("namespace") == expected, (obj["kind"], obj["metadata"])
        if obj["kind"] == "CiliumNetworkPolicy":
            assert not crd_schema_errors(obj), obj["metadata"]["name"]
            findings = lint_text(yaml.safe_dump(obj), obj["metadata"]["name"])
            assert not findings, [f"{f.code} {f.message}" for f in findings]
            continue
        if obj["kind"] in CRD_SCHEMAS:
            jsonschema.validate(obj, CRD_SCHEMAS[obj["kind"]])
            continue
        kubernetes_validate.validate(obj, KUBERNETES, strict=True)
    specs = pod_specs(objects)
    assert specs, "every overlay runs cpg somewhere"
    for where, pod in specs:
        assert not restricted_problems(pod), (where, restricted_problems(pod))
        for container in pod["containers"]:  # one image, the one this version builds
            assert container["image"] == f"localhost/cpg:{cpg_version()}"


def built_at(folder: Path) -> list[dict[str, Any]]:
    ran = subprocess.run(
        [_kubectl(), "kustomize", str(folder)], capture_output=True, text=True, timeout=60
    )
    assert ran.returncode == 0, ran.stderr
    return [doc for doc in yaml.safe_load_all(ran.stdout) if doc]


def images(objects: list[dict[str, Any]]) -> set[str]:
    return {c["image"] for _, pod in pod_specs(objects) for c in pod["containers"]}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_one_images_entry_names_the_image_of_every_container(overlay: str, tmp_path: Path) -> None:
    """A team pulling from its own registry sets the image once, in its own overlay (or in
    deploy/components/image): every container of every overlay follows, CronJobs too."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "resources": [os.path.relpath(ROOT / "deploy" / "overlays" / overlay, mine)],
                "images": [
                    {
                        "name": "localhost/cpg",
                        "newName": "registry.example.com/platform/cpg",
                        "newTag": "9.9.9",
                    }
                ],
            }
        )
    )
    assert images(built_at(mine)) == {"registry.example.com/platform/cpg:9.9.9"}
    # and the component's own entry is the only one under deploy/
    entries = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "deploy").rglob("kustomization.yaml"))
        if "images" in (yaml.safe_load(path.read_text()) or {})
    ]
    assert entries == ["deploy/components/image/kustomization.yaml"]
    copy = tmp_path / "deploy"
    shutil.copytree(ROOT / "deploy", copy)
    component = copy / "components" / "image" / "kustomization.yaml"
    component.write_text(component.read_text().replace("localhost/cpg", "ghcr.io/acme/cpg"))
    assert images(built_at(copy / "overlays" / overlay)) == {f"ghcr.io/acme/cpg:{cpg_version()}"}


def test_each_overlay_runs_what_it_says() -> None:
    live = {o["kind"]: o for o in built("live")}
    args = live["Deployment"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[0] == "generate" and "--output-dir=/data/policies" in args
    assert live["ServiceAccount"]["automountServiceAccountToken"] is False
    assert "Role" not in live and "ClusterRole" not in live  # no API access at all
    tls_objects = {o["kind"]: o for o in built("live-tls")}
    tls_pod = tls_objects["Deployment"]["spec"]["template"]["spec"]
    assert "--tls-ca-cert=/etc/hubble-tls/ca.crt" in tls_pod["containers"][0]["args"]
    # the client certificate is cert-manager's, renewed, and the Secret the pod mounts
    certificate = tls_objects["Certificate"]["spec"]
    (mounted,) = [v["secret"]["secretName"] for v in tls_pod["volumes"] if "secret" in v]
    assert certificate["secretName"] == mounted
    assert "client auth" in certificate["usages"] and certificate["renewBefore"]
    assert certificate["issuerRef"]["kind"] == "ClusterIssuer"  # from another namespace
    misspelt = {**tls_objects["Certificate"], "spec": {**certificate, "usages": ["client-auth"]}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(misspelt, CRD_SCHEMAS["Certificate"])
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
    tag = re.compile(r"(?:localhost|ghcr\.io/OWNER)/cpg:(\d+\.\d+\.\d+)|refs/tags/v(\d+\.\d+\.\d+)")
    places = [ROOT / "README.md", ROOT / "docs" / "in-cluster.md"]
    places += sorted((ROOT / "deploy").rglob("*.yaml"))
    places += sorted((ROOT / ".github").rglob("*.yml"))
    named = {
        f"{path.relative_to(ROOT)}: {found}"
        for path in places
        for found in ("".join(groups) for groups in tag.findall(path.read_text()))
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


def test_every_generate_pod_has_probes_on_its_metrics_port() -> None:
    for overlay in OVERLAYS:
        for obj in built(overlay):
            if obj["kind"] != "Deployment":
                continue
            (container,) = obj["spec"]["template"]["spec"]["containers"]
            assert "--metrics-addr=:9090" in container["args"], overlay
            assert container["ports"] == [
                {"name": "metrics", "containerPort": 9090, "protocol": "TCP"}
            ]
            assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
            assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}


def _metric_names(expr: str) -> set[str]:
    return set(re.findall(r"\bcpg_[a-z_]+", expr))


def test_the_monitoring_overlay_alerts_and_draws_what_cpg_exports() -> None:
    from cpg_io.metrics import exported_names

    exported = exported_names()
    objects = {o["kind"]: o for o in built("monitoring")}
    monitor = objects["ServiceMonitor"]
    service = objects["Service"]
    assert monitor["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    rules = [r for g in objects["PrometheusRule"]["spec"]["groups"] for r in g["rules"]]
    assert {r["alert"] for r in rules} >= {
        "CpgRelayDisconnected",
        "CpgNoFlows",
        "CpgLostEvents",
        "CpgShadowWouldBreak",
        "CpgDriftFound",
        "CpgWriteFailures",
    }
    for rule in rules:
        names = _metric_names(rule["expr"])
        assert names and names <= exported, (rule["alert"], names - exported)
    dashboard = json.loads(objects["ConfigMap"]["data"]["cpg.json"])
    assert objects["ConfigMap"]["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert dashboard["panels"]
    for panel in dashboard["panels"]:
        exprs = [target["expr"] for target in panel["targets"]]
        names = set().union(*(_metric_names(e) for e in exprs))
        assert names and names <= exported, (panel["title"], names - exported)
    # Prometheus may reach the metrics port; nothing else gets in
    policy = objects["CiliumNetworkPolicy"]
    assert all(
        rule["toPorts"][0]["ports"] == [{"port": "9090", "protocol": "TCP"}]
        for rule in policy["spec"]["ingress"]
    )


def test_the_archive_policy_reaches_regional_endpoints_and_propose_keeps_one_branch() -> None:
    from cpg_core.policy._matcher import fqdn_matches
    from cpg_core.policy._model import read_name_match

    (policy,) = [
        o
        for o in built("archive")
        if o["kind"] == "CiliumNetworkPolicy" and "archive" in o["metadata"]["name"]
    ]
    selectors = [read_name_match(s) for s in policy["spec"]["egress"][0]["toFQDNs"]]
    for name in (
        "s3.amazonaws.com",
        "s3.eu-west-1.amazonaws.com",
        "my-bucket.s3.eu-west-1.amazonaws.com",
        "my-bucket.s3.amazonaws.com",
        "sts.us-east-2.amazonaws.com",
        "s3-external-1.amazonaws.com",
    ):
        assert fqdn_matches([name], selectors), name
    for name in ("ec2.eu-west-1.amazonaws.com", "evil.example.com", "s3.amazonaws.com.evil.io"):
        assert not fqdn_matches([name], selectors), name
    (job,) = [o for o in built("propose") if o["kind"] == "CronJob"]
    args = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--branch=cpg/policies" in args


def test_the_storage_holds_the_namespace_and_the_volume_every_overlay_mounts() -> None:
    ran = subprocess.run(
        [_kubectl(), "kustomize", str(ROOT / "deploy" / "storage")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr
    objects = {o["kind"]: o for o in yaml.safe_load_all(ran.stdout) if o}
    assert set(objects) == {"Namespace", "PersistentVolumeClaim"}
    assert objects["PersistentVolumeClaim"]["metadata"]["namespace"] == "cpg"
    claim = objects["PersistentVolumeClaim"]["metadata"]["name"]
    for overlay in OVERLAYS:
        for _where, pod in pod_specs(built(overlay)):
            claims = {
                v["persistentVolumeClaim"]["claimName"]
                for v in pod["volumes"]
                if "persistentVolumeClaim" in v
            }
            assert claims == {claim}, overlay


def test_the_nodelocal_dns_component_lets_every_cpg_policy_resolve_through_the_cache(
    tmp_path: Path,
) -> None:
    shutil.copytree(ROOT / "deploy", tmp_path / "deploy")
    overlay = tmp_path / "deploy" / "overlays" / "mine"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        "resources:\n  - ../archive\ncomponents:\n  - ../../components/nodelocaldns\n"
    )
    ran = subprocess.run(
        [_kubectl(), "kustomize", str(overlay)], capture_output=True, text=True, timeout=60
    )
    assert ran.returncode == 0, ran.stderr
    policies = [
        o for o in yaml.safe_load_all(ran.stdout) if o and o["kind"] == "CiliumNetworkPolicy"
    ]
    assert len(policies) == 2  # cpg's own and the archive job's
    for policy in policies:
        assert not crd_schema_errors(policy)
        findings = lint_text(yaml.safe_dump(policy), policy["metadata"]["name"])
        assert not findings, [f"{f.code} {f.message}" for f in findings]
        egress = policy["spec"]["egress"]
        assert any(
            r.get("toEndpoints", [{}])[0].get("matchLabels", {}).get("k8s-app") == "node-local-dns"
            for r in egress
        )
        assert any(r.get("toEntities") == ["host"] for r in egress)
