"""Identities read from the cluster (``--identities cluster``, and ``--cluster`` in a check),
through a fake Kubernetes API; the pod's own service account when cpg runs in one; and
cpg-mcp's ``identities``."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from mcp import Client

from conftest import cpg, endpoint, flow_dict, jsonl, self_signed, wait_for
from fake_kube import fake_kube

POD_IP = "10.9.9.9"
FRONTEND = {
    "apiVersion": "cilium.io/v2",
    "kind": "CiliumEndpoint",
    "metadata": {"name": "frontend-1", "namespace": "shop"},
    "status": {
        "identity": {
            "id": 41000,
            "labels": ["k8s:app=frontend", "k8s:io.kubernetes.pod.namespace=shop"],
        },
        "networking": {"addressing": [{"ipv4": POD_IP}]},
    },
}


def _capture(tmp_path: Path, verdict: str = "DROPPED") -> Path:
    """shop/frontend, reported as the world with its pod name, → shop/cart TCP/8080."""
    as_world = {"identity": 2, "labels": ["reserved:world"], "pod_name": "frontend-1"}
    reason = "POLICY_DENIED" if verdict == "DROPPED" else None
    path = tmp_path / f"{verdict.lower()}.jsonl"
    flows = [
        flow_dict(as_world, endpoint("shop", "cart"), src_ip=POD_IP, verdict=verdict, reason=reason)
    ]
    path.write_text(jsonl(flows))
    return path


def test_replay_reads_the_identities_of_the_cluster(tmp_path: Path) -> None:
    with fake_kube(tmp_path) as (kube, kubeconfig):
        kube.identity_objects = [FRONTEND]
        out = tmp_path / "policies"
        ran = cpg(
            "replay",
            str(_capture(tmp_path)),
            "-d",
            str(out),
            "--no-evidence",
            "--identities",
            "cluster",
            "--kubeconfig",
            str(kubeconfig),
            "-o",
            "json",
        )
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["identities"] == {"world_pod": 1}
    policy = yaml.safe_load((out / "shop" / "cart.yaml").read_text())
    assert policy["spec"]["ingress"][0]["fromEndpoints"] == [{"matchLabels": {"app": "frontend"}}]
    listed = {path for _, path in kube.requests}
    assert {"/apis/cilium.io/v2/ciliumendpoints", "/apis/cilium.io/v2/ciliumidentities"} <= listed
    assert "/api/v1/pods" in listed


def test_a_check_against_the_cluster_reads_its_identities_too(tmp_path: Path) -> None:
    capture = _capture(tmp_path, "FORWARDED")
    proposal = tmp_path / "proposal" / "shop"
    proposal.mkdir(parents=True)
    cart = {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumNetworkPolicy",
        "metadata": {"name": "cpg-cart", "namespace": "shop"},
        "spec": {
            "endpointSelector": {"matchLabels": {"app": "cart"}},
            "ingress": [{"fromEndpoints": [{"matchLabels": {"app": "frontend"}}]}],
        },
    }
    (proposal / "cart.yaml").write_text(yaml.safe_dump(cart))
    plan = ["plan", str(capture), "-d", str(proposal.parent), "--cluster", "-o", "json"]
    with fake_kube(tmp_path) as (kube, kubeconfig):
        kube.identity_objects = [FRONTEND]
        planned = cpg(*plan, "--kubeconfig", str(kubeconfig))
        kube.identity_objects = None  # the identities may not be listed: the plan goes on
        blind = cpg(*plan, "--kubeconfig", str(kubeconfig))
    assert planned.returncode == 0, planned.stdout + planned.stderr  # frontend is admitted
    assert "identities not read" not in planned.stderr
    assert blind.returncode == 3  # judged as the world, which cart's policy does not admit
    assert "cpg: warning: identities not read from the cluster (listing pods failed" in blind.stderr


@pytest.fixture
def api_cert(tmp_path: Path) -> tuple[Path, Path]:
    """A key and a self-signed certificate for 127.0.0.1: the API server's and its CA."""
    return self_signed(tmp_path, "kubernetes", "IP:127.0.0.1")


def test_in_a_pod_the_service_account_is_used(
    tmp_path: Path, api_cert: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import cpg_io.kube
    from cpg_io.kube import cluster_identities

    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text("pod-token-123")
    shutil.copy(api_cert[1], account / "ca.crt")
    with fake_kube(tmp_path, tls=api_cert) as (kube, kubeconfig):
        kube.identity_objects = [FRONTEND]
        port = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
        monkeypatch.setattr(cpg_io.kube, "SERVICE_ACCOUNT", account)
        monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
        monkeypatch.setenv("KUBERNETES_SERVICE_PORT", port.rsplit(":", 1)[1])
        monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config
        monkeypatch.delenv("KUBECONFIG", raising=False)
        found = cluster_identities(None, None)
        assert cpg_io.kube.in_a_pod(str(tmp_path / "no-kubeconfig"))
        assert not cpg_io.kube.in_a_pod(str(kubeconfig))  # a kubeconfig, when there is one, wins
    assert [o["metadata"]["name"] for o in found if o["kind"] == "CiliumEndpoint"] == ["frontend-1"]
    assert {header.lower() for header in kube.authorization} == {"bearer pod-token-123"}


def test_an_mcp_session_takes_identities_from_the_allowed_folder(tmp_path: Path) -> None:
    from cpg_mcp.server import build_server

    allowed = tmp_path / "captures"
    allowed.mkdir()
    shutil.copy(_capture(tmp_path), allowed / "drops.jsonl")
    (allowed / "ids.json").write_text(json.dumps({"kind": "List", "items": [FRONTEND]}))

    async def session() -> tuple[Any, Any]:
        async with Client(build_server(allowed), mode="legacy") as client:
            outside = await client.call_tool(
                "start_session", {"replay_file": "drops.jsonl", "identities": ["../ids.json"]}
            )
            started = await client.call_tool(
                "start_session", {"replay_file": "drops.jsonl", "identities": ["ids.json"]}
            )
            sid = started.structured_content["session_id"]
            for _ in range(400):
                status = await client.call_tool("get_status", {"session_id": sid})
                if status.structured_content["state"] == "stopped":
                    break
                await anyio.sleep(0.05)
            policy = await client.call_tool(
                "get_policy", {"session_id": sid, "namespace": "shop", "workload": "cart"}
            )
            return outside, policy

    outside, policy = anyio.run(session)
    assert outside.is_error and "identities must name a file inside" in outside.content[0].text
    assert "app: frontend" in policy.structured_content["yaml"]


def test_a_live_capture_fills_in_identities_as_flows_arrive(tmp_path: Path) -> None:
    from fake_relay import fake_relay, responses_from_lines

    identities = tmp_path / "ids.json"
    identities.write_text(json.dumps(FRONTEND))
    lines = _capture(tmp_path).read_text().splitlines()
    out = tmp_path / "live"
    with fake_relay(responses_from_lines(lines)) as (_relay, address):
        ran = cpg(
            "generate",
            "--server",
            address,
            "-d",
            str(out),
            "--no-evidence",
            "--duration",
            "1s",
            "--identities",
            str(identities),
            "-o",
            "json",
        )
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["identities"] == {"world_pod": 1}
    policy = yaml.safe_load((out / "shop" / "cart.yaml").read_text())
    assert policy["spec"]["ingress"][0]["fromEndpoints"] == [{"matchLabels": {"app": "frontend"}}]


def test_a_live_session_reads_the_clusters_identities_again_as_pods_come(
    tmp_path: Path,
) -> None:
    """A pod that starts while ``generate`` runs is named once the identities are read
    again; before, the same flow stays the world (a finding, no rule)."""
    from cpg_core import RunRequest
    from cpg_io import runs
    from fake_relay import fake_relay, responses_from_lines

    checkout_ip = "10.9.9.10"
    checkout = json.loads(json.dumps(FRONTEND))
    checkout["metadata"]["name"] = "checkout-1"
    checkout["status"]["identity"] = {
        "id": 41001,
        "labels": ["k8s:app=checkout", "k8s:io.kubernetes.pod.namespace=shop"],
    }
    checkout["status"]["networking"]["addressing"] = [{"ipv4": checkout_ip}]
    as_world = {"identity": 2, "labels": ["reserved:world"], "pod_name": "checkout-1"}
    late = flow_dict(as_world, endpoint("shop", "cart"), src_ip=checkout_ip, tcp=9090)
    lines = [*_capture(tmp_path).read_text().splitlines(), jsonl([late]).strip()]
    lines.append(jsonl([{**late, "flow": {**late["flow"], "time": "2026-11-02T10:05:00Z"}}]))
    out = tmp_path / "live"
    with (
        fake_kube(tmp_path) as (kube, kubeconfig),
        fake_relay(responses_from_lines(lines)) as (relay, address),
    ):
        kube.identity_objects = [FRONTEND]
        relay.pause_after = 2  # frontend's flow and checkout's first, before it is known
        request = RunRequest.build(
            server=address, identities=["cluster"], flush_interval="1h", evidence=False
        )
        capture = runs.live(request, runs.RelayAccess(kubeconfig=kubeconfig), out)
        assert capture.identity_refresh is not None
        capture.identity_refresh.interval = 0.05

        async def session() -> Any:
            task = asyncio.create_task(capture.run())
            assert await asyncio.to_thread(wait_for, lambda: capture.progress.flows == 2)
            kube.identity_objects = [FRONTEND, checkout]  # checkout-1 started
            readings = capture.identity_readings
            assert await asyncio.to_thread(
                wait_for, lambda: capture.identity_readings >= readings + 2
            )
            relay.resume.set()
            assert await asyncio.to_thread(wait_for, lambda: capture.progress.flows == 3)
            capture.stop.set()
            return await task

        try:
            result = asyncio.run(session())
        finally:
            capture.close()
    assert dict(result.aggregator.identities) == {"world_pod": 2}
    policy = yaml.safe_load((out / "shop" / "cart.yaml").read_text())
    peers = [rule["fromEndpoints"][0]["matchLabels"] for rule in policy["spec"]["ingress"]]
    assert {"app": "checkout"} in peers and {"app": "frontend"} in peers
    listings = [p for _, p in kube.requests if p.startswith("/apis/cilium.io/v2/ciliumendpoints")]
    assert len(listings) >= 3  # at the start, and again while it ran


def test_identities_from_files_are_not_read_again_and_a_failed_reading_says_why(
    tmp_path: Path,
) -> None:
    from cpg_io.identities import identity_refresh

    assert identity_refresh(["ids.json"]) is None  # files do not change while a session runs
    with fake_kube(tmp_path) as (kube, kubeconfig):
        kube.identity_objects = [FRONTEND]
        given = tmp_path / "ids.json"
        given.write_text(json.dumps(FRONTEND))
        refresh = identity_refresh([str(given), "cluster"], kubeconfig=kubeconfig)
        assert refresh is not None
        kube.status = 403
        book, problem = refresh.read()
    assert book is None and "needs 'list' on it" in problem


_TRACE = ("trace", "--identities", "cluster", "--from", "shop/a", "--to", "shop/b", "--port", "80")


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        (b'[{"kind": "Pod"}]', "is not a Kubernetes list"),
        (b'{"items": [1, "x", null]}', ""),
        (b'{"items": "nope"}', "is not a Kubernetes list"),
        (b"[" * 100_000, "not JSON cpg reads"),
    ],
)
def test_a_broken_api_answer_is_one_error_line_or_nothing_to_read(
    tmp_path: Path, answer: bytes, words: str
) -> None:
    """Answers checked before use: a body that is a list, items that are not objects (left
    out), items that are not a list, JSON nested too deep, for identities and lint."""
    from fake_kube import fake_kube

    policy = tmp_path / "p.yaml"
    policy.write_text(
        "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata: {name: a, namespace: "
        "shop}\nspec:\n  endpointSelector: {matchLabels: {app: a}}\n  ingress:\n  - "
        "fromEndpoints: [{matchLabels: {app: b}}]\n"
    )
    (tmp_path / "none").mkdir()
    with fake_kube(tmp_path) as (kube, kubeconfig):
        kube.raw = answer
        checks = [
            cpg(*_TRACE, "-d", str(tmp_path / "none"), "--kubeconfig", str(kubeconfig)),
            cpg("lint", str(policy), "--cluster", "--kubeconfig", str(kubeconfig)),
        ]
    for ran in checks:
        assert "Traceback" not in ran.stderr
        if words:
            assert ran.returncode == 1 and words in ran.stderr, ran.stderr
            assert len(ran.stderr.strip().splitlines()) == 1, ran.stderr
        else:
            assert ran.returncode in (0, 3, 4), ran.stderr


def test_an_api_that_never_answers_is_an_error_not_a_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fake_kube import fake_kube

    monkeypatch.setattr("cpg_io.kube.REQUEST_TIMEOUT", 0.5)
    with fake_kube(tmp_path) as (kube, kubeconfig):
        kube.hang.set()
        ran = cpg(*_TRACE, "-d", str(tmp_path / "none"), "--kubeconfig", str(kubeconfig))
        asked = list(kube.requests)
    assert ran.returncode == 1 and "no answer within 0.5 s" in ran.stderr, ran.stderr
    # issue 67: the client asked a silent server three more times (30 s said, 122 s held);
    # a request it never answers is asked once, inside the deadline the message states
    assert len(asked) == 1, asked
