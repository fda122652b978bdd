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


def settings(objects: list[dict[str, Any]]) -> dict[str, str]:
    """The environment the generate container gets from its settings ConfigMap."""
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    (source,) = container["envFrom"]
    name = source["configMapRef"]["name"]
    (config,) = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == name]
    return dict(config["data"])


def test_each_overlay_runs_what_it_says() -> None:
    live = {o["kind"]: o for o in built("live")}
    args = live["Deployment"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args == ["generate", "--quiet"]  # every setting comes from the ConfigMap
    assert settings(built("live"))["CPG_OUTPUT_DIR"] == "/data/policies"
    assert live["ServiceAccount"]["automountServiceAccountToken"] is False
    assert "Role" not in live and "ClusterRole" not in live  # no API access at all
    tls_objects = {o["kind"]: o for o in built("live-tls")}
    tls_pod = tls_objects["Deployment"]["spec"]["template"]["spec"]
    tls_settings = settings(built("live-tls"))
    assert tls_settings["HUBBLE_TLS_CA_CERT_FILES"] == "/etc/hubble-tls/ca.crt"
    assert tls_settings["HUBBLE_SERVER"].endswith(":443")
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
    listable = {
        (group, resource)
        for rule in role["rules"]
        if "list" in rule["verbs"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    from cpg_io.kube import DECLARATION_LISTS

    # --declarations=cluster lists exactly these, and may list each of them
    assert {(group, plural) for group, _v, plural, _k, _n in DECLARATION_LISTS} <= listable
    (deployment,) = [o for o in dedup if o["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    wanted = {"--cluster-dedup", "--identities=cluster", "--declarations=cluster"}
    assert wanted <= set(pod["containers"][0]["args"])
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
            assert settings(built(overlay))["CPG_METRICS_ADDR"] == ":9090", overlay
            assert container["ports"] == [
                {"name": "metrics", "containerPort": 9090, "protocol": "TCP"}
            ]
            assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
            assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}


def _metric_names(expr: str) -> set[str]:
    return set(re.findall(r"\b(?:cpg|process)_[a-z_]+|\bup\b(?=\{)", expr))


def test_the_monitoring_overlay_alerts_and_draws_what_cpg_exports() -> None:
    from cpg_io.metrics import exported_names

    # up: Prometheus' own, per scrape target; kube-state-metrics' Deployment replicas (which
    # kube-prometheus-stack ships): whether a cpg Deployment is meant to run at all
    exported = exported_names() | {"up", "kube_deployment_spec_replicas"}
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
    (board,) = [o for o in built("monitoring") if o["metadata"]["name"] == "cpg-dashboard"]
    dashboard = json.loads(board["data"]["cpg.json"])
    assert board["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert dashboard["panels"]
    row = ""
    sessions = {"shadow": "cpg_shadow_", "drift": "cpg_drift_"}
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            row = panel.get("repeat", "")
            if row:  # shown once per pod the variable's query finds: none, no row
                assert variables[row]["definition"].startswith(f"label_values({sessions[row]}")
            continue
        exprs = [target["expr"] for target in panel["targets"]]
        names = set().union(*(_metric_names(e) for e in exprs))
        assert names and names <= exported, (panel["title"], names - exported)
        # a shadow or drift session's panels are in its row, and show only its pods
        own = {
            kind for kind, prefix in sessions.items() if any(n.startswith(prefix) for n in names)
        }
        if row:
            assert all(f'pod=~"${row}"' in e for e in exprs), panel["title"]
        assert own <= {row} and (not row or own or "evaluation" in " ".join(names)), panel["title"]
    # per instance: every panel of the generate sessions follows the instance variables,
    # and memory, version and the time since the last flush are drawn
    for name in ("cluster", "namespace", "pod"):
        assert variables[name]["includeAll"] and variables[name]["allValue"] == ".*"
    first_row = next(n for n, p in enumerate(dashboard["panels"][1:], 1) if p["type"] == "row")
    for panel in dashboard["panels"][1:first_row]:
        for target in panel["targets"]:
            expr = target["expr"]
            assert 'pod=~"$pod"' in expr and 'cluster=~"$cluster"' in expr, panel["title"]
            assert "by (pod" in expr or "cpg_build_info" in expr, panel["title"]
    titles = {p["title"] for p in dashboard["panels"]}
    assert {"Memory (resident)", "Version", "Since the last flush"} <= titles
    # Prometheus may reach the metrics port; nothing else gets in
    policy = objects["CiliumNetworkPolicy"]
    assert all(
        rule["toPorts"][0]["ports"] == [{"port": "9090", "protocol": "TCP"}]
        for rule in policy["spec"]["ingress"]
    )


def test_the_archive_policy_reaches_regional_endpoints_and_propose_keeps_one_branch() -> None:
    from cpg_core._policy.matcher import fqdn_matches
    from cpg_core._policy.model import read_name_match

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


def _mine(
    tmp_path: Path, overlay: str, *, namespace: str = "", **more: list[str]
) -> list[dict[str, Any]]:
    """Built: a user's own overlay over one of deploy/overlays (``more``: its components,
    transformers…), as docs/in-cluster.md shows it."""
    mine = tmp_path / f"mine-{overlay}-{namespace or 'cpg'}-{'-'.join(more)}"
    mine.mkdir()
    body: dict[str, Any] = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(ROOT / "deploy" / "overlays" / overlay, mine)],
    }
    if namespace:
        body["namespace"] = namespace
    for field, paths in more.items():
        body[field] = [os.path.relpath(ROOT / "deploy" / path, mine) for path in paths]
    (mine / "kustomization.yaml").write_text(yaml.safe_dump(body))
    return built_at(mine)


COMPOSABLE = [o for o in OVERLAYS if o != "monitoring"]  # monitoring is live + the component


@pytest.mark.parametrize("overlay", COMPOSABLE)
def test_the_monitoring_component_composes_with_every_overlay(overlay: str, tmp_path: Path) -> None:
    objects = _mine(tmp_path, overlay, components=["components/monitoring"])
    kinds = {obj["kind"]: obj for obj in objects}
    assert {"ServiceMonitor", "PrometheusRule", "ConfigMap"} <= set(kinds)
    for kind in ("ServiceMonitor", "PrometheusRule", "ConfigMap"):
        # cpg's own labels, as on every object of deploy/base
        assert kinds[kind]["metadata"]["labels"]["app.kubernetes.io/name"] == "cpg", kind
    for kind in ("ServiceMonitor", "PrometheusRule"):
        jsonschema.validate(kinds[kind], CRD_SCHEMAS[kind])
        assert kinds[kind]["metadata"]["labels"]["release"] == "kube-prometheus-stack"
        assert kinds[kind]["metadata"]["namespace"] == "cpg"
    (policy,) = [
        o for o in objects if o["kind"] == "CiliumNetworkPolicy" and o["metadata"]["name"] == "cpg"
    ]
    assert not crd_schema_errors(policy)
    assert any(
        rule.get("fromEndpoints", [{}])[0].get("matchLabels", {}).get("app.kubernetes.io/name")
        == "prometheus"
        for rule in policy["spec"]["ingress"]
    )
    # what the overlay itself makes is all still there
    assert {(o["kind"], o["metadata"]["name"]) for o in built(overlay)} <= {
        (o["kind"], o["metadata"]["name"]) for o in objects
    }


def test_the_selector_labels_are_set_in_one_place(tmp_path: Path) -> None:
    """One file names the labels Prometheus selects by; both objects follow it."""
    copy = tmp_path / "deploy"
    shutil.copytree(ROOT / "deploy", copy)
    labels = copy / "components" / "monitoring" / "selector-labels.yaml"
    labels.write_text(labels.read_text().replace("release: kube-prometheus-stack", "release: mon"))
    objects = built_at(copy / "overlays" / "monitoring")
    selected = {o["kind"]: o["metadata"].get("labels", {}) for o in objects}
    assert selected["ServiceMonitor"]["release"] == "mon"
    assert selected["PrometheusRule"]["release"] == "mon"
    setting = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "deploy").rglob("*.yaml"))
        if re.search(r"^\s*release:", path.read_text(), re.M)
    ]
    assert setting == ["deploy/components/monitoring/selector-labels.yaml"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_a_user_overlay_with_its_own_namespace_works(overlay: str, tmp_path: Path) -> None:
    """``namespace: platform-cpg`` over any overlay: every object moves, the bindings follow
    the service account (a subject left in ``cpg`` is a 403 at start), and with the
    cluster-names transformer cluster-scoped objects carry the namespace in their names."""
    plain = _mine(tmp_path, overlay, namespace="platform-cpg")
    named = _mine(
        tmp_path, overlay, namespace="platform-cpg", transformers=["transformers/cluster-names"]
    )
    monitored = (
        []
        if overlay == "monitoring"
        else _mine(
            tmp_path, overlay, namespace="platform-cpg", components=["components/monitoring"]
        )
    )
    for objects in (plain, named, monitored):
        for obj in objects:
            expected = None if obj["kind"] in CLUSTER_SCOPED else "platform-cpg"
            assert obj["metadata"].get("namespace") == expected, (obj["kind"], obj["metadata"])
            for subject in obj.get("subjects") or []:
                assert subject["namespace"] == "platform-cpg", obj["metadata"]["name"]
    roles = {o["metadata"]["name"] for o in named if o["kind"] == "ClusterRole"}
    for obj in named:
        if obj["kind"] in {"ClusterRole", "ClusterRoleBinding"}:
            assert obj["metadata"]["name"].startswith("platform-cpg:"), obj["metadata"]["name"]
        if obj["kind"] == "ClusterRoleBinding":
            assert obj["roleRef"]["name"] in roles
    # the default install carries its own namespace too: two installs never share a name
    assert all(
        o["metadata"]["name"].startswith("cpg:")
        for o in built(overlay)
        if o["kind"] in {"ClusterRole", "ClusterRoleBinding"}
    )


def test_the_settings_configmap_is_what_generate_reads(tmp_path: Path) -> None:
    """Every key of the settings ConfigMap is an environment variable ``cpg generate``
    reads (its -h says so), and a real generate run with only that environment (an
    overlay's CPG_NAMESPACE merged in) follows the relay and writes where it says, only the
    namespace asked for."""
    from conftest import CPG, cpg
    from fake_relay import example_responses, fake_relay

    data = settings(built("live"))
    helped = cpg("generate", "-h").stdout
    for key in data:
        assert f"env var: {key}" in re.sub(r"\s+", " ", helped), key
    (deployment,) = [o for o in built("live") if o["kind"] == "Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CPG_", "HUBBLE_"))}
    with fake_relay(example_responses()) as (_relay, address):
        env.update(
            {
                **data,
                "HUBBLE_SERVER": address,
                "CPG_NAMESPACE": "shop",
                "CPG_OUTPUT_DIR": str(tmp_path / "policies"),
                "CPG_EVIDENCE_DIR": str(tmp_path / "evidence"),
                "CPG_METRICS_ADDR": "127.0.0.1:0",
                "CPG_FLUSH_INTERVAL": "1s",
            }
        )
        ran = subprocess.run(
            [CPG, *args, "--duration", "3s"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
    assert ran.returncode == 0, ran.stderr
    written = sorted(
        p.relative_to(tmp_path / "policies") for p in (tmp_path / "policies").rglob("*.yaml")
    )
    assert written and {p.parts[0] for p in written} == {"shop"}, written
    assert list((tmp_path / "evidence").rglob("*.json"))


GUARD_KUBERNETES = ("1.30", "1.31", "1.32", "1.33", "1.34")
"""The releases whose ValidatingAdmissionPolicy (v1, with variables) the guard is for."""


def test_the_admission_guard_component_is_lints_rules_and_validates(tmp_path: Path) -> None:
    """deploy/components/admission-guard is `cpg lint --admission-policy` as it is today,
    composes with an overlay, and each of its objects is valid to Kubernetes 1.30 to 1.34."""
    import kubernetes_validate

    from cpg_core.reports import admission_yaml

    component = ROOT / "deploy" / "components" / "admission-guard"
    assert (component / "guard.yaml").read_text() == admission_yaml(), (
        "regenerate it: cpg lint --admission-policy > deploy/components/admission-guard/guard.yaml"
    )
    objects = _mine(tmp_path, "archive", components=["components/admission-guard"])
    guard = [o for o in objects if o["metadata"].get("name", "").startswith("cpg-lint")]
    kinds = sorted(o["kind"] for o in guard)
    assert kinds == [
        "ConfigMap",
        "ConfigMap",
        "ConfigMap",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "ValidatingAdmissionPolicyBinding",
        "ValidatingAdmissionPolicyBinding",
    ]
    for obj in guard:
        for release in GUARD_KUBERNETES:
            kubernetes_validate.validate(obj, release, strict=True)
        if obj["kind"] == "ConfigMap":
            assert obj["metadata"]["namespace"] == "cpg"
    bindings = {o["metadata"]["name"]: o["spec"] for o in guard if o["kind"].endswith("Binding")}
    assert bindings["cpg-lint-deny"]["validationActions"] == ["Warn"]  # until a user flips it
    for name, spec in bindings.items():
        exempt = {"key": "cpg.io/guard", "operator": "NotIn", "values": ["exempt"]}
        for selector in ("namespaceSelector", "objectSelector"):  # a namespace or a policy
            assert spec["matchResources"][selector] == {"matchExpressions": [exempt]}
        assert spec["paramRef"] == {
            "name": name,
            "namespace": "cpg",
            "parameterNotFoundAction": "Allow",
        }
