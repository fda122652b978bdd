"""What the cluster declares keeps working (§D58), as a user runs cpg: on the synthetic
cluster and the public hubble-otel captures, ``replay --declarations`` keeps each declared
dependency open (``trace`` admits it) and nothing beside it (``trace`` still denies another
port and another peer); ``plan`` lists what a folder written without them denies; hostile
sources give one line and a bounded wait."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import CORPUS, cpg
from declared_objects import (
    deployment,
    istio_prometheus,
    istio_webhook,
    node_local_dns,
    service,
    write_objects,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from synthetic import synthetic_capture

SHARED_MISSING = not CORPUS.is_dir()


def _trace(folder: Path, source: str, destination: str, port: str, *more: str) -> int:
    ran = cpg(
        "trace", "--from", source, "--to", destination, "--port", port, "-d", str(folder), *more
    )
    assert ran.returncode in (0, 3), ran.stdout + ran.stderr
    return ran.returncode


def _synthetic_objects() -> list[dict[str, Any]]:
    """A webhook served by app-01/api (Service 443 → 8443), an APIService served by
    app-02/api (Service 443 → named port https, 6443), monitoring/prometheus scraping
    app-02/web by annotation on 9102, the API server on 6443, and a node-local DNS cache."""
    return [
        deployment("api", "app-01", {"app": "api"}, [("webhook", 8443)]),
        service("api-webhook", "app-01", {"app": "api"}, [("https", 443, 8443)]),
        {
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "api-defaults"},
            "webhooks": [
                {
                    "name": "defaults.app-01.example.com",
                    "clientConfig": {"service": {"namespace": "app-01", "name": "api-webhook"}},
                }
            ],
        },
        deployment("api", "app-02", {"app": "api"}, [("https", 6443)]),
        service("api", "app-02", {"app": "api"}, [("https", 443, "https")]),
        {
            "kind": "APIService",
            "metadata": {"name": "v1.app-02.example.com"},
            "spec": {"service": {"namespace": "app-02", "name": "api"}},
        },
        deployment("prometheus", "monitoring", {"app": "prometheus"}, [("web", 9090)]),
        deployment(
            "web",
            "app-02",
            {"app": "web"},
            [("http", 8080), ("metrics", 9102)],
            annotations={"prometheus.io/scrape": "true", "prometheus.io/port": "9102"},
        ),
        service("kubernetes", "default", None, [("https", 443, 6443)]),
        {
            "kind": "EndpointSlice",
            "metadata": {
                "name": "kubernetes",
                "namespace": "default",
                "labels": {"kubernetes.io/service-name": "kubernetes"},
            },
            "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}],
        },
        *node_local_dns(),
    ]


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("synthetic")
    capture = synthetic_capture(folder / "capture.jsonl", 20)
    return capture, write_objects(folder / "objects", _synthetic_objects())


def test_declared_dependencies_stay_open_on_the_synthetic_cluster(
    synthetic: tuple[Path, Path], tmp_path: Path
) -> None:
    capture, objects = synthetic
    out = tmp_path / "policies"
    ran = cpg("replay", str(capture), "-d", str(out), "--declarations", str(objects), "-o", "json")
    assert ran.returncode == 0, ran.stderr
    report = json.loads(ran.stdout)
    assert report["declarations"]["notes"] == []
    kept = {
        (d["namespace"], d["workload"], d["traffic"]) for d in report["cluster_scope"]["declared"]
    }
    assert ("app-01", "api", "TCP/8443 from entity kube-apiserver") in kept
    assert ("app-02", "api", "TCP/6443 from entity kube-apiserver") in kept
    assert ("app-02", "web", "TCP/9102 from monitoring/app=prometheus") in kept
    assert ("monitoring", "prometheus", "TCP/9102 to app-02/app=web") in kept
    assert ("monitoring", "prometheus", "TCP/6443 to entity kube-apiserver") in kept
    admitted = [
        ("kube-apiserver", "app-01:app=api", "8443/TCP"),
        ("kube-apiserver", "app-02:app=api", "6443/TCP"),
        ("monitoring:app=prometheus", "app-02:app=web", "9102/TCP"),
        ("monitoring:app=prometheus", "kube-apiserver", "6443/TCP"),
        ("app-03:app=db", "kube-system:k8s-app=node-local-dns", "53/UDP"),
        ("app-03:app=db", "169.254.20.10", "53/TCP"),
    ]
    for source, destination, port in admitted:
        assert _trace(out, source, destination, port) == 0, (source, destination, port)
    denied = [
        ("kube-apiserver", "app-01:app=api", "443/TCP"),  # the Service port, never the pod's
        ("kube-apiserver", "app-01:app=api", "9443/TCP"),
        ("app-01:app=web", "app-01:app=api", "8443/TCP"),  # another peer
        ("kube-apiserver", "app-03:app=api", "8443/TCP"),  # not a webhook's pod
        ("monitoring:app=prometheus", "app-02:app=web", "9103/TCP"),
        ("monitoring:app=prometheus", "kube-apiserver", "443/TCP"),
        ("app-03:app=db", "169.254.20.11", "53/UDP"),
    ]
    for source, destination, port in denied:
        assert _trace(out, source, destination, port) == 3, (source, destination, port)
    said = (out / "app-01" / "api.yaml").read_text()
    assert (
        "# TCP/8443 from entity kube-apiserver; declared by MutatingWebhookConfiguration "
        "api-defaults (TCP/8443)"
    ) in said
    traced = cpg(
        "trace",
        "--from",
        "kube-apiserver",
        "--to",
        "app-01:app=api",
        "--port",
        "8443/TCP",
        "-d",
        str(out),
        "--declarations",
        str(objects),
    )
    assert "declared: by MutatingWebhookConfiguration api-defaults" in traced.stdout
    lint = cpg("lint", str(out), "--declarations", str(objects))
    assert lint.returncode == 0, lint.stdout  # no CPG045: every declared dependency is open
    explained = cpg("explain", "app-01/api", "-d", str(out))
    assert "declared:   by MutatingWebhookConfiguration api-defaults" in explained.stdout
    assert "not observed" in explained.stdout


def test_a_folder_written_before_lists_each_declared_dependency_it_denies(
    synthetic: tuple[Path, Path], tmp_path: Path
) -> None:
    capture, objects = synthetic
    out = tmp_path / "policies"
    assert cpg("replay", str(capture), "-d", str(out)).returncode == 0  # no declarations
    planned = cpg(
        "plan", str(capture), "-d", str(out), "--declarations", str(objects), "-o", "json"
    )
    assert planned.returncode == 3, planned.stderr
    breaks = json.loads(planned.stdout)["would_break"]
    declared = {
        (b["traffic"]["source"], b["traffic"]["destination"], b["traffic"]["port"]): [
            d["kind"] + " " + d["name"] for d in b["declared_by"]
        ]
        for b in breaks
        if b["declared_by"]
    }
    assert declared[("kube-apiserver", "app-01/api", 8443)] == [
        "MutatingWebhookConfiguration api-defaults"
    ]
    assert declared[("kube-apiserver", "app-02/api", 6443)] == ["APIService v1.app-02.example.com"]
    assert ("monitoring/prometheus", "app-02/web", 9102) in declared
    assert ("monitoring/prometheus", "kube-apiserver", 6443) in declared
    fix = next(b for b in breaks if b["declared_by"] and b["traffic"]["port"] == 8443)
    assert "fromEntities" in fix["rule_yaml"] and '"8443"' in fix["rule_yaml"]
    text = cpg("plan", str(capture), "-d", str(out), "--declarations", str(objects))
    assert "(declared, MutatingWebhookConfiguration api-defaults)" in text.stdout
    lint = cpg("lint", str(out), "--declarations", str(objects))
    assert lint.returncode == 3 and "CPG045" in lint.stdout
    verify = cpg("verify", str(capture), "-d", str(out), "--declarations", str(objects))
    assert verify.returncode == 3, verify.stdout
    assert "NOT admitted  (declared) app-01/cpg-api" in verify.stdout
    assert cpg("verify", str(capture), "-d", str(out)).returncode == 0  # the drops: admitted
    report = cpg("report", "-d", str(out), "--declarations", str(objects))
    assert "## Declared dependencies the policies deny (CPG045)" in report.stdout
    fixed = cpg(
        "plan", str(capture), "-d", str(out), "--declarations", str(objects), "--write-fixes"
    )
    assert fixed.returncode == 0, fixed.stderr  # the plan with the fixes written
    again = cpg("plan", str(capture), "-d", str(out), "--declarations", str(objects))
    assert again.returncode == 0, again.stdout
    verified = cpg("verify", str(capture), "-d", str(out), "--declarations", str(objects))
    assert verified.returncode == 0, verified.stdout


@pytest.mark.skipif(SHARED_MISSING, reason="../shared/corpus is not there")
def test_the_public_captures_keep_what_their_clusters_declare(tmp_path: Path) -> None:
    """The 10-flow GKE capture puts Istio's galley into ingress default-deny (with the
    catalogue off): its validating webhook stays reachable from the API server on the target
    port, nothing else; Istio's Prometheus (348 HTTP flows) keeps the annotated target and
    its discovery; and a capture showing node-local-dns makes every DNS rule admit it."""
    objects = write_objects(tmp_path / "objects", [*istio_webhook(), *istio_prometheus()])
    ten = CORPUS / "hubble-otel__basic-sample-10-flows.json"
    out = tmp_path / "ten"
    learn = ("--learn", "forwarded", "--catalogue", "none")
    assert (
        cpg("replay", str(ten), "-d", str(out), *learn, "--declarations", str(objects)).returncode
        == 0
    )
    galley = "istio-system:app=galley,istio=galley"
    assert _trace(out, "kube-apiserver", galley, "9443/TCP") == 0
    assert _trace(out, "kube-apiserver", galley, "443/TCP") == 3
    assert _trace(out, "istio-system:app=telemetry", galley, "9443/TCP") == 3
    bare = tmp_path / "bare"
    assert cpg("replay", str(ten), "-d", str(bare), *learn).returncode == 0
    assert _trace(bare, "kube-apiserver", galley, "9443/TCP") == 3  # the cut it closes
    http = CORPUS / "hubble-otel__basic-sample-348-http-flows.json"
    out = tmp_path / "http"
    ran = cpg("replay", str(http), "-d", str(out), *learn, "--declarations", str(objects))
    assert ran.returncode == 0, ran.stderr
    prometheus = "istio-system:app=prometheus"
    assert _trace(out, prometheus, "bookinfo:app=reviews", "15090/TCP") == 0
    assert _trace(out, prometheus, "kube-apiserver", "443/TCP") == 0  # 443 and 6443: assumed
    assert _trace(out, prometheus, "bookinfo:app=reviews", "15091/TCP") == 3
    assert _trace(out, prometheus, "kube-apiserver", "8443/TCP") == 3
    assert "Prometheus' discovery kept open on 443 and 6443" in ran.stderr + ran.stdout


@pytest.mark.skipif(SHARED_MISSING, reason="../shared/corpus is not there")
def test_without_declarations_the_captures_own_signals_hold(tmp_path: Path) -> None:
    ten = CORPUS / "hubble-otel__basic-sample-10-flows.json"
    out = tmp_path / "ten"
    ran = cpg("replay", str(ten), "-d", str(out), "--learn", "forwarded")
    assert ran.returncode == 0
    assert not (out / "istio-system").exists()  # Istio's control plane is left alone
    assert "istio-system/galley: recognised as Istio (namespace istio-system)" in ran.stdout
    assert "--catalogue none turns it off" in ran.stdout
    assert _trace(out, "kube-apiserver", "istio-system:app=galley", "9443/TCP") == 0
    dns = CORPUS / "hubble-otel__basic-sample-330-dns-flows.json"
    http = CORPUS / "hubble-otel__basic-sample-348-http-flows.json"
    both = tmp_path / "both"
    learn = ("--learn", "forwarded", "--catalogue", "none")
    assert cpg("replay", str(dns), str(http), "-d", str(both), *learn).returncode == 0
    egress = yaml.safe_load((both / "bookinfo" / "ratings.yaml").read_text())["spec"]["egress"]
    peers = [r.get("toEndpoints") for r in egress]
    cache = {
        "matchLabels": {"io.kubernetes.pod.namespace": "kube-system", "k8s-app": "node-local-dns"}
    }
    assert [cache] in peers  # the cache the capture shows joins every DNS rule
    assert _trace(both, "bookinfo:app=ratings", "kube-system:k8s-app=node-local-dns", "53/UDP") == 0


def test_a_printed_fix_never_widens_a_person_s_policy(tmp_path: Path) -> None:
    """A hand-written clusterwide policy selects every pod; the fix plan prints for the
    toolbox's SSH names a new policy of the API's own, as --write-fixes writes it."""
    capture = synthetic_capture(tmp_path / "capture.jsonl", 20)
    out = tmp_path / "policies"
    assert cpg("replay", str(capture), "-d", str(out)).returncode == 0
    everyone = {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumClusterwideNetworkPolicy",
        "metadata": {"name": "allow-dns-everyone"},
        "spec": {
            "endpointSelector": {},
            "ingress": [
                {
                    "fromEntities": ["cluster"],
                    "toPorts": [{"ports": [{"port": "53", "protocol": "UDP"}]}],
                }
            ],
        },
    }
    (out / "allow-dns-everyone.yaml").write_text(yaml.safe_dump(everyone))
    planned = cpg("plan", str(capture), "-d", str(out), "-o", "json")
    assert planned.returncode == 3
    toolbox = [
        b
        for b in json.loads(planned.stdout)["would_break"]
        if b["traffic"]["source"] == "ops/toolbox"
    ]
    assert toolbox
    for item in toolbox:
        namespace, workload = item["endpoint"].split("/")
        assert item["policy"] == f"{namespace}/cpg-{workload}", item  # never the CCNP
        assert "allow-dns-everyone" not in item["fix"], item


def test_hostile_sources_give_one_line_each_and_the_run_goes_on(tmp_path: Path) -> None:
    capture = synthetic_capture(tmp_path / "capture.jsonl", 4)
    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / "not-a-policy-numbers.json").write_text("[1, 2, 3]")
    (odd / "not-a-policy-cnp.yaml").write_text(
        "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata: {name: x}\nspec: {}\n"
    )
    (odd / "not-a-policy-chart.yaml").write_text(
        "kind: Service\nmetadata:\n  name: {{ .Release.Name }}\n"
    )
    (odd / "not-a-policy-broken.yaml").write_text("kind: Service\n  metadata: [\n")
    (odd / "not-a-policy-service.yaml").write_text(
        "kind: Service\nmetadata: {name: s, namespace: app-01}\nspec: {selector: app}\n"
    )
    (odd / "not-a-policy-latin1.yaml").write_bytes(b"kind: Service\nmetadata: {name: caf\xe9}\n")
    out = tmp_path / "policies"
    ran = cpg("replay", str(capture), "-d", str(out), "--declarations", str(odd))
    assert ran.returncode == 0, ran.stderr
    notes = [line for line in ran.stdout.splitlines() if line.startswith("  left out: ")]
    assert len(notes) == 6, notes
    said = "\n".join(notes)
    assert "not-a-policy-numbers.json: no object cpg reads" in said
    assert "not-a-policy-cnp.yaml: no object cpg reads" in said
    assert "not-a-policy-chart.yaml: an unrendered Helm template; render it first" in said
    assert "not-a-policy-broken.yaml" in said and "not-a-policy-latin1.yaml: not UTF-8" in said
    assert "Service app-01/s: spec.selector is not a map of labels; left out" in said
    missing = cpg("replay", str(capture), "-d", str(out), "--declarations", str(tmp_path / "nope"))
    assert missing.returncode == 1
    assert (
        "--declarations" in missing.stderr
        and "kubectl get validatingwebhookconfigurations" in missing.stderr
    )


def test_the_cluster_s_declarations_are_listed_read_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fake_kube import fake_kube

    capture = synthetic_capture(tmp_path / "capture.jsonl", 20)
    out = tmp_path / "policies"
    with fake_kube(tmp_path) as (kube, kubeconfig):
        kube.declared = _synthetic_objects()
        kube.forbidden = {"/apis/monitoring.coreos.com/v1/prometheuses"}
        ran = cpg(
            "replay",
            str(capture),
            "-d",
            str(out),
            "--declarations",
            "cluster",
            "--kubeconfig",
            str(kubeconfig),
        )
        methods = {method for method, _path in kube.requests}
        listed = {path.split("?")[0] for _m, path in kube.requests}
    assert ran.returncode == 0, ran.stderr
    assert methods == {"GET"}
    assert "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations" in listed
    assert "not allowed to list prometheuses.monitoring.coreos.com" in ran.stdout
    assert _trace(out, "kube-apiserver", "app-01:app=api", "8443/TCP") == 0
    monkeypatch.setattr("cpg_io.kube.REQUEST_TIMEOUT", 0.5)
    with fake_kube(tmp_path) as (kube, kubeconfig):
        kube.hang.set()
        silent = cpg(
            "replay",
            str(capture),
            "-d",
            str(tmp_path / "silent"),
            "--declarations",
            "cluster",
            "--kubeconfig",
            str(kubeconfig),
        )
        asked = {path for _method, path in kube.requests}
    assert silent.returncode == 1 and "no answer within 0.5 s" in silent.stderr, silent.stderr
    assert len(asked) == 1  # one bounded wait (the client's retries of it), not one per list
    with fake_kube(tmp_path) as (kube, kubeconfig):
        kube.raw = b'{"items": "not a list"}'
        odd = cpg(
            "replay",
            str(capture),
            "-d",
            str(tmp_path / "odd"),
            "--declarations",
            "cluster",
            "--kubeconfig",
            str(kubeconfig),
        )
    assert odd.returncode == 0, odd.stderr
    assert "is not a Kubernetes list" in odd.stdout


def test_a_live_capture_keeps_what_the_cluster_declares(
    synthetic: tuple[Path, Path], tmp_path: Path
) -> None:
    from fake_relay import fake_relay, responses_from_lines

    capture, objects = synthetic
    out = tmp_path / "live"
    with fake_relay(responses_from_lines(capture.read_text().splitlines())) as (_r, address):
        ran = cpg(
            "generate",
            "--server",
            address,
            "-d",
            str(out),
            "--no-evidence",
            "--duration",
            "1s",
            "--declarations",
            str(objects),
        )
    assert ran.returncode == 0, ran.stderr
    assert (
        "declared by MutatingWebhookConfiguration api-defaults"
        in (out / "app-01" / "api.yaml").read_text()
    )
    assert _trace(out, "kube-apiserver", "app-01:app=api", "8443/TCP") == 0
