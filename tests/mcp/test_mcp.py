"""cpg-mcp in process, through the SDK client in both modes (legacy JSON-RPC and direct)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any, get_args

import anyio
import pytest
from mcp import Client
from mcp.server.mcpserver.exceptions import ToolError

from conftest import EXAMPLE, cpg, endpoint, flow_dict, jsonl
from cpg_mcp.server import build_server

pytestmark = pytest.mark.anyio

MODES = ["legacy", "auto"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def replay_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "captures"
    folder.mkdir()
    shutil.copy(EXAMPLE, folder / "drops.jsonl")
    # a pod name, not a label: a label Kubernetes refuses is a finding, never a rule
    evil_pod = endpoint("shop", "web", pod_name="web\x1b[31mred\x1b[0m")
    evil = flow_dict(src=evil_pod, dst=endpoint("shop", "evil"))
    (folder / "evil.jsonl").write_text(jsonl([evil]))
    return folder


async def call(client: Client, tool: str, **args: Any) -> Any:
    return await client.call_tool(tool, args)


async def wait_stopped(client: Client, session_id: str) -> dict[str, Any]:
    for _ in range(400):
        status = (await call(client, "get_status", session_id=session_id)).structured_content
        if status["state"] == "stopped":
            return status
        await anyio.sleep(0.05)
    raise AssertionError("the replay session never ended")


@pytest.mark.parametrize("mode", MODES)
async def test_a_replay_session_end_to_end(replay_dir: Path, mode: str) -> None:
    async with Client(build_server(replay_dir), mode=mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == {
            "start_session",
            "get_status",
            "stop_session",
            "list_policies",
            "get_policy",
            "get_evidence",
            "get_cluster_health",
            "get_bootstrap_policy",
            "list_dropped_flows",
            "get_plan",
            "get_report",
            "explain_flow",
            "trace_flow",
        }
        for tool in tools.values():
            assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", tool.name)
            assert tool.description and tool.output_schema and tool.title
            assert tool.input_schema["additionalProperties"] is False
        assert tools["get_policy"].annotations.read_only_hint is True
        assert tools["get_policy"].annotations.open_world_hint is False
        started = (
            await call(client, "start_session", replay_file="drops.jsonl")
        ).structured_content
        sid = started["session_id"]
        assert sid.startswith("sess_") and len(sid) > 30
        status = await wait_stopped(client, sid)
        assert status["policy_file_count"] == 6 and status["evidence_file_count"] == 6
        # how much the session was given, and what of it is ready (§D59)
        assert (
            status["capture"].startswith("7 m 21 s (2026-11-02T09:30:07Z")
            and ", 64 flows;" in status["capture"]
        )
        assert status["readiness"] == "0 of 6 workloads ready to enforce"
        listed = (await call(client, "list_policies", session_id=sid, limit=4)).structured_content
        assert listed["total_count"] == 6 and listed["has_more"] and len(listed["policies"]) == 4
        assert not listed["next_cursor"].isdigit()
        rest = (
            await call(client, "list_policies", session_id=sid, cursor=listed["next_cursor"])
        ).structured_content
        assert len(rest["policies"]) == 2 and not rest["has_more"]
        policy = (
            await call(client, "get_policy", session_id=sid, namespace="shop", workload="cart")
        ).structured_content
        assert policy["name"] == "cpg-cart" and "kind: CiliumNetworkPolicy" in policy["yaml"]
        evidence = (
            await call(
                client,
                "get_evidence",
                session_id=sid,
                namespace="shop",
                workload="cart",
                direction="ingress",
            )
        ).structured_content
        assert list(evidence)[:3] == ["policy", "sessions", "matched_rules"]
        assert all(r["direction"] == "ingress" for r in evidence["matched_rules"])
        stop = (await call(client, "stop_session", session_id=sid)).structured_content
        assert stop["already_stopped"] is False and stop["flows_seen"] == 64
        assert (stop["capture"], stop["readiness"]) == (status["capture"], status["readiness"])
        again = (await call(client, "stop_session", session_id=sid)).structured_content
        assert again["already_stopped"] is True
        assert stop["infra_drops_by_reason"]["CT_MAP_INSERTION_FAILED"] == 4
        assert stop["policies_written"] == 6 and stop["policies_failed"] == 0
        report = (await call(client, "get_report", session_id=sid)).structured_content
        assert "```mermaid" in report["markdown"] and "### shop/cpg-cart" in report["markdown"]
        health = (await call(client, "get_cluster_health", session_id=sid)).structured_content
        assert {d["reason"] for d in health["report"]["drops"]} >= {"CT_MAP_INSERTION_FAILED"}
        dropped = (
            await call(client, "list_dropped_flows", session_id=sid, limit=200)
        ).structured_content
        rows = dropped["aggregates"]["rows"]
        assert {
            "namespace": "shop",
            "workload": "cart",
            "reason": "CT_MAP_INSERTION_FAILED",
            "class": "infra",
            "count": 4,
        } in rows
        assert dropped["total_count"] == len(dropped["samples"]) + len(rows)
        assert {s["drop_reason"] for s in dropped["samples"]} >= {"POLICY_DENIED"}
        tmp = Path(status["tmp_dir"])
        assert tmp.is_dir() and (tmp.stat().st_mode & 0o777) == 0o700
    assert not tmp.exists(), "the session dir goes when the server stops"


@pytest.mark.parametrize("mode", MODES)
async def test_errors_are_readable_tool_errors(replay_dir: Path, mode: str) -> None:
    async with Client(build_server(replay_dir), mode=mode) as client:
        unknown = await call(client, "get_status", session_id="sess_nope")
        assert unknown.is_error
        assert re.fullmatch(
            r"session 'sess_nope' not found or expired; call start_session \(trace [0-9a-f]{8}\)",
            unknown.content[0].text,
        )
        wrong_type = await call(client, "list_policies", session_id="s", limit="many")
        assert wrong_type.content[0].text.startswith("invalid arguments for list_policies: limit:")
        sid = (await call(client, "start_session", replay_file="drops.jsonl")).structured_content[
            "session_id"
        ]
        await wait_stopped(client, sid)
        for ns, wl in (("..", "cart"), ("shop", "../x"), ("/etc", "cart"), ("shop", "a/b")):
            bad = await call(client, "get_policy", session_id=sid, namespace=ns, workload=wl)
            assert bad.is_error and "is not valid" in bad.content[0].text
        garbage = await call(client, "list_policies", session_id=sid, cursor="!!not-a-cursor")
        assert garbage.is_error and "invalid cursor" in garbage.content[0].text
        outside = await call(client, "start_session", replay_file="../../etc/passwd")
        assert outside.is_error and "inside" in outside.content[0].text
        missing = await call(
            client, "get_policy", session_id=sid, namespace="shop", workload="nope"
        )
        assert missing.is_error and "list_policies" in missing.content[0].text


async def test_replay_needs_the_operators_permission() -> None:
    async with Client(build_server(None), mode="legacy") as client:
        result = await call(client, "start_session", replay_file="drops.jsonl")
        assert result.is_error and "--allow-replay-dir" in result.content[0].text


async def test_control_characters_never_reach_a_result(replay_dir: Path) -> None:
    async with Client(build_server(replay_dir), mode="legacy") as client:
        sid = (await call(client, "start_session", replay_file="evil.jsonl")).structured_content[
            "session_id"
        ]
        await wait_stopped(client, sid)
        evidence = await call(
            client, "get_evidence", session_id=sid, namespace="shop", workload="evil"
        )
        flows = await call(client, "list_dropped_flows", session_id=sid)
        health = (await call(client, "get_cluster_health", session_id=sid)).structured_content
        assert health == {
            "no_drops": True,
            "message": "no infra/transient drops observed this session",
        }
        for result in (evidence, flows):
            text = json.dumps(result.structured_content) + result.content[0].text
            assert "\x1b" not in text and "\\u001b" not in text
            assert "webred" in text and "[31m" not in text, "no escape residue either"


async def test_bootstrap_policy_tool_without_a_cluster() -> None:
    async with Client(build_server(None), mode="legacy") as client:
        ok = (await call(client, "get_bootstrap_policy", namespace="shop")).structured_content
        assert (
            ok["yaml"].startswith("apiVersion: cilium.io/v2") and "default-deny-shop" in ok["yaml"]
        )
        assert ok["version_source"] == "undetermined" and "proceeding" in ok["version_warning"]
        bad = await call(client, "get_bootstrap_policy", namespace="../etc")
        assert bad.is_error and "not a valid namespace" in bad.content[0].text
        empty = await call(client, "get_bootstrap_policy", namespace="")
        assert empty.is_error and "namespace is required" in empty.content[0].text


def cilium_pod(name: str, image: str, phase: str = "Running") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"k8s-app": "cilium"}},
        "spec": {"containers": [{"name": "cilium-agent", "image": image}]},
        "status": {"phase": phase},
    }


async def test_bootstrap_policy_tool_reads_the_cilium_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fake_kube_pf import fake_cluster

    with fake_cluster(tmp_path, 1) as (cluster, kubeconfig):
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
        cluster.pods += [
            cilium_pod("cilium-a", "quay.io/cilium/cilium:v1.19.4@sha256:00ff"),
            cilium_pod("cilium-b", "quay.io/cilium/cilium:v1.18.2"),
            cilium_pod("cilium-c", "quay.io/cilium/cilium:v1.12.0", phase="Pending"),
        ]
        async with Client(build_server(None, version_check_timeout=60.0), mode="legacy") as client:
            ok = (await call(client, "get_bootstrap_policy", namespace="shop")).structured_content
            assert ok["cluster_version"] == "1.18.2" and ok["version_source"] == "pod-images"
            assert ok["cilium_versions_seen"] == {"1.18.2": 1, "1.19.4": 1}
            assert "version_warning" not in ok
            cluster.pods.append(cilium_pod("cilium-d", "quay.io/cilium/cilium:v1.15.9"))
            old = await call(client, "get_bootstrap_policy", namespace="shop")
            assert old.is_error
            assert "cluster Cilium version 1.15.9 is below the enableDefaultDeny floor" in (
                old.content[0].text
            )


async def dropped(client: Client, sid: str, **filters: Any) -> dict[str, Any]:
    result = await call(client, "list_dropped_flows", session_id=sid, limit=200, **filters)
    assert not result.is_error, result.content[0].text
    return result.structured_content


@pytest.mark.parametrize("mode", MODES)
async def test_list_dropped_flows_filters_and_pages(replay_dir: Path, mode: str) -> None:
    async with Client(build_server(replay_dir), mode=mode) as client:
        sid = (await call(client, "start_session", replay_file="drops.jsonl")).structured_content[
            "session_id"
        ]
        await wait_stopped(client, sid)
        whole = await dropped(client, sid)
        assert whole["samples"] and whole["aggregates"]["rows"]
        infra = await dropped(client, sid, dropclass="infra")
        assert infra["samples"] == [] and infra["aggregates"]["rows"]
        assert all(r["class"] == "infra" for r in infra["aggregates"]["rows"])
        policy = await dropped(client, sid, dropclass="policy")
        assert policy["samples"] and "rows" not in policy["aggregates"]
        assert all(s["drop_reason"] == "POLICY_DENIED" for s in policy["samples"])
        noise = await dropped(client, sid, dropclass="noise")
        assert noise["samples"] == [] and noise["total_count"] == 0
        ingress = await dropped(client, sid, direction="ingress")
        assert all(s["direction"] == "ingress" for s in ingress["samples"])
        assert ingress["aggregates"]["rows"] == whole["aggregates"]["rows"]
        cart = await dropped(client, sid, namespace="shop", workload="cart")
        assert {(r["namespace"], r["workload"]) for r in cart["samples"]} == {("shop", "cart")}
        # Paging walks the same view in pages: samples before rows within a workload.
        seen: list[Any] = []
        cursor = None
        while True:
            args: dict[str, Any] = {"limit": 3} | ({"cursor": cursor} if cursor else {})
            page = (
                await call(client, "list_dropped_flows", session_id=sid, **args)
            ).structured_content
            seen += page["samples"] + (page["aggregates"].get("rows") or [])
            assert len(page["samples"]) + len(page["aggregates"].get("rows") or []) <= 3
            cursor = page.get("next_cursor")
            if not page["has_more"]:
                break
        assert len(seen) == whole["total_count"]
        bad = await call(client, "list_dropped_flows", session_id=sid, dropclass="bogus")
        assert bad.is_error
        traversal = await call(client, "list_dropped_flows", session_id=sid, namespace="..")
        assert traversal.is_error and "is not valid" in traversal.content[0].text


@pytest.mark.parametrize("mode", MODES)
async def test_unknown_arguments_are_refused_with_the_allowed_list(
    replay_dir: Path, mode: str
) -> None:
    async with Client(build_server(replay_dir), mode=mode) as client:
        result = await call(client, "get_status", session_id="sess_x", verbose=True)
        text = result.content[0].text
        assert result.is_error
        assert "unknown argument 'verbose' for get_status; allowed: session_id" in text
        assert re.search(r"\(trace [0-9a-f]{8}\)$", text)


async def test_an_expired_deadline_is_a_readable_error(
    replay_dir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import threading

    from cpg_io.evidence_store import EvidenceStore

    release = threading.Event()
    real_read = EvidenceStore.read

    def stuck_read(self: EvidenceStore, namespace: str, workload: str) -> Any:
        release.wait(30)  # a file system that hangs; released at the end of the test
        return real_read(self, namespace, workload)

    async with Client(build_server(replay_dir, tool_timeout=0.3), mode="legacy") as client:
        sid = (await call(client, "start_session", replay_file="drops.jsonl")).structured_content[
            "session_id"
        ]
        await wait_stopped(client, sid)
        monkeypatch.setattr(EvidenceStore, "read", stuck_read)
        try:
            with anyio.fail_after(10):
                result = await call(
                    client, "get_evidence", session_id=sid, namespace="shop", workload="cart"
                )
        finally:
            release.set()
        text = result.content[0].text
        assert result.is_error and "get_evidence did not finish within 0.3s" in text
        trace = re.search(r"\(trace ([0-9a-f]{8})\)", text)
        assert trace and any(trace.group(1) in r.getMessage() for r in caplog.records)
        # The server still answers after an abandoned call.
        status = await call(client, "get_status", session_id=sid)
        assert not status.is_error


async def test_every_call_leaves_an_audit_line(replay_dir: Path) -> None:
    import hashlib
    import io

    from cpg_mcp.audit import AuditLog

    sink = io.StringIO()
    async with Client(build_server(replay_dir, audit=AuditLog(sink)), mode="legacy") as client:
        sid = (await call(client, "start_session", replay_file="drops.jsonl")).structured_content[
            "session_id"
        ]
        await call(client, "get_status", session_id="sess_nope")
        await call(client, "get_status", session_id=sid, extra=1)
    lines = [json.loads(line) for line in sink.getvalue().splitlines()]
    assert [line["tool"] for line in lines[:3]] == ["start_session", "get_status", "get_status"]
    assert [line["outcome"] for line in lines[:3]] == ["ok", "error", "rejected"]
    first = lines[0]
    assert set(first) == {
        "time",
        "tool",
        "outcome",
        "duration_ms",
        "trace_id",
        "arguments_sha256",
        "result_sha256",
    }
    canonical = json.dumps({"replay_file": "drops.jsonl"}, sort_keys=True, separators=(",", ":"))
    assert first["arguments_sha256"] == hashlib.sha256(canonical.encode()).hexdigest()
    assert sid not in sink.getvalue(), "the audit log holds hashes, not results"
    assert len({line["trace_id"] for line in lines}) == len(lines)


async def test_a_live_session_port_forwards_with_the_environments_kubeconfig(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fake_kube_pf import fake_cluster
    from fake_relay import fake_relay, responses_from_lines

    responses = responses_from_lines(EXAMPLE.read_text().splitlines())
    with (
        fake_relay(responses) as (_, address),
        fake_cluster(tmp_path, int(address.rsplit(":", 1)[1])) as (cluster, kubeconfig),
    ):
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
        async with Client(build_server(None), mode="legacy") as client:
            started = await call(client, "start_session", flush_interval="1s")
            assert not started.is_error, started.content[0].text
            sid = started.structured_content["session_id"]
            assert started.structured_content["server"].startswith("127.0.0.1:")
            with anyio.fail_after(30):
                while (await call(client, "get_status", session_id=sid)).structured_content[
                    "policy_file_count"
                ] < 6:
                    await anyio.sleep(0.05)
            stop = (await call(client, "stop_session", session_id=sid)).structured_content
            assert stop["flows_seen"] >= 64 and not stop.get("error")
            assert cluster.forwards and all("ports=4245" in f for f in cluster.forwards)
            cluster.pods.clear()
            refused = await call(client, "start_session")
            text = refused.content[0].text
            assert refused.is_error and "no hubble-relay pod in kube-system" in text
            # the set-up error is the CLI's, with the argument's name for the flag
            assert text.startswith("server not given and no port-forward to hubble-relay: ")


async def test_a_session_that_fails_by_itself_shows_its_error(replay_dir: Path) -> None:
    (replay_dir / "broken.gz").write_bytes(b"\x1f\x8b\x08\x00garbage that is not deflate")
    async with Client(build_server(replay_dir), mode="legacy") as client:
        sid = (await call(client, "start_session", replay_file="broken.gz")).structured_content[
            "session_id"
        ]
        status = await wait_stopped(client, sid)
        assert status["error"]
        stop = (await call(client, "stop_session", session_id=sid)).structured_content
        assert stop["error"] == status["error"] and stop["already_stopped"] is False
        health = await call(client, "get_cluster_health", session_id=sid)
        assert health.is_error
        assert "cluster health unavailable: session ended with error" in health.content[0].text


async def test_the_tool_list_on_the_wire_is_pinned(snapshot: Any) -> None:
    """Names, titles, descriptions, schemas and annotations are the interface agents learn."""
    async with Client(build_server(None), mode="legacy") as client:
        tools = (await client.list_tools()).tools
    wire = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]
    assert json.dumps(wire, indent=2, sort_keys=True) == snapshot


async def test_a_port_forward_opened_after_the_deadline_is_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import threading

    import cpg_io.kube

    release, closed = threading.Event(), threading.Event()

    class LateForwarder:
        address, pod = "127.0.0.1:1", "hubble-relay-late"

        def close(self) -> None:
            closed.set()

    def slow_forward(api: Any, namespace: str, timeout: float) -> LateForwarder:
        release.wait(30)  # an API server that answers after the call's deadline
        return LateForwarder()

    monkeypatch.setattr(cpg_io.kube, "api_client", lambda *a, **k: object())
    monkeypatch.setattr(cpg_io.kube, "forward_to_relay", slow_forward)
    async with Client(build_server(None, tool_timeout=0.3), mode="legacy") as client:
        late = await call(client, "start_session")
        assert late.is_error and "start_session did not finish within 0.3s" in late.content[0].text
        release.set()
        assert await anyio.to_thread.run_sync(closed.wait, 10), "the late port-forward is closed"


async def test_bad_file_names_and_huge_arguments_are_short_readable_errors(
    replay_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with Client(build_server(replay_dir), mode="legacy") as client:
        for name in ("drops\x00.jsonl", "a" * 300, ""):
            bad = await call(client, "start_session", replay_file=name)
            text = bad.content[0].text
            assert bad.is_error and "failed unexpectedly" not in text, text
            assert "replay_file" in text and "inside" in text
        sid = (await call(client, "start_session", replay_file="drops.jsonl")).structured_content[
            "session_id"
        ]
        await wait_stopped(client, sid)
        huge = "x" * (10 * 1024 * 1024)
        for tool, args in (
            ("get_policy", {"session_id": sid, "namespace": huge, "workload": "w"}),
            (
                "get_evidence",
                {"session_id": sid, "namespace": "shop", "workload": "cart", "peer": huge},
            ),
            ("get_bootstrap_policy", {"namespace": huge}),
            ("start_session", {"ignore_protocols": [huge]}),
            ("start_session", {huge: 1}),
        ):
            result = await call(client, tool, **args)
            assert result.is_error and len(result.content[0].text) < 1200, tool
        assert all(len(r.getMessage()) < 2000 for r in caplog.records)
        port = await call(
            client, "get_evidence", session_id=sid, namespace="shop", workload="cart", port="abc"
        )
        assert port.is_error and "'abc' is not a port number" in port.content[0].text


async def test_expired_deadlines_stop_the_work_and_the_server_is_idle_again(
    tmp_path: Path,
) -> None:
    """Thirty concurrent calls that all run past their deadline: all are answered, and the
    reading threads stop, so the server answers promptly again soon after."""
    import time

    from cpg_mcp import server as server_module

    folder = tmp_path / "captures"
    folder.mkdir()
    (folder / "one.jsonl").write_text(jsonl([flow_dict()]))
    deadline = 0.3
    async with Client(build_server(folder, tool_timeout=deadline), mode="legacy") as client:
        sid = (await call(client, "start_session", replay_file="one.jsonl")).structured_content[
            "session_id"
        ]
        status = await wait_stopped(client, sid)
        # 4,000 evidence files: copies of the one the replay wrote.
        (evidence,) = Path(status["tmp_dir"]).glob("evidence/*/shop/cart.json")
        text = evidence.read_text()
        for i in range(4000):
            namespace = evidence.parent.parent / f"ns-{i % 20}"
            namespace.mkdir(exist_ok=True)
            (namespace / f"svc-{i:04}.json").write_text(text)
        results: list[Any] = [None] * 30

        async def one(index: int) -> None:
            results[index] = await call(client, "list_dropped_flows", session_id=sid, limit=200)

        async with anyio.create_task_group() as group:
            for index in range(30):
                group.start_soon(one, index)
        answered = time.monotonic()
        assert all(r is not None for r in results), "every call was answered"
        assert any(r.is_error and "did not finish within" in r.content[0].text for r in results)
        with anyio.fail_after(deadline + 2):  # no reading thread runs on
            while server_module.RUNNING.count:
                await anyio.sleep(0.02)
        assert time.monotonic() - answered <= deadline + 2
        quick = await call(client, "get_policy", session_id=sid, namespace="shop", workload="cart")
        assert not quick.is_error


async def test_a_live_session_over_tls_with_a_ca_and_a_server_name(
    tmp_path: Path, relay_cert: tuple[Path, Path]
) -> None:

    from fake_relay import fake_tls_relay, responses_from_lines

    key, cert = relay_cert
    responses = responses_from_lines(EXAMPLE.read_text().splitlines())
    with fake_tls_relay(responses, cert.read_bytes(), key.read_bytes()) as (_, address):
        async with Client(build_server(None, allow_tls_dir=cert.parent), mode="legacy") as client:
            missing = await call(
                client, "start_session", server=address, tls_ca_cert=str(cert.parent / "no.pem")
            )
            assert missing.is_error and "tls_ca_cert" in missing.content[0].text
            started = await call(
                client,
                "start_session",
                server=address,
                tls_ca_cert=str(cert),
                tls_server_name="hubble-relay.test",
                flush_interval="1s",
            )
            assert not started.is_error, started.content[0].text
            sid = started.structured_content["session_id"]
            with anyio.fail_after(30):
                while (await call(client, "get_status", session_id=sid)).structured_content[
                    "policy_file_count"
                ] < 6:
                    await anyio.sleep(0.05)
            stopped = (await call(client, "stop_session", session_id=sid)).structured_content
            assert stopped["policies_written"] + stopped["policies_skipped"] >= 6
            assert not stopped.get("error")


@pytest.mark.parametrize("mode", MODES)
async def test_get_plan_over_a_stopped_replay_session(replay_dir: Path, mode: str) -> None:
    from captures import ingress_capture

    ingress_capture(replay_dir / "all.jsonl", allowed_by=True)
    async with Client(build_server(replay_dir), mode=mode) as client:
        sid = (await call(client, "start_session", replay_file="all.jsonl")).structured_content[
            "session_id"
        ]
        early = await call(client, "get_plan", session_id=sid)
        await wait_stopped(client, sid)
        if early.is_error:  # a replay that had not ended yet says so
            assert "stop_session" in early.content[0].text
        plan = (await call(client, "get_plan", session_id=sid, limit=1)).structured_content
        assert plan["current_source"] == "flows" and plan["fixed"] == plan["candidates"] == 2
        (broken,) = plan["would_break"]
        assert broken["traffic"]["source"] == "monitoring/prometheus"
        assert "version NotIn (v2)" in broken["fix"]
        assert plan["would_break_flows"] == 12 and plan["total_count"] == 1
        assert not plan["has_more"]
        assert plan["section"] == "would_break" and "newly_enforced" not in plan
        assert plan["totals"]["would_break"] == 1 and plan["totals"]["newly_enforced"] == 1
        newly_page = await call(client, "get_plan", session_id=sid, section="newly_enforced")
        (newly,) = newly_page.structured_content["newly_enforced"]
        assert newly["labels"]["version"] == "v2"
        diffs = await call(client, "get_plan", session_id=sid, section="diffs")
        assert {d["policy"]: d["status"] for d in diffs.structured_content["diffs"]} == {
            "shop/cpg-api": "new"
        }
        assert diffs.structured_content["total_count"] == plan["totals"]["diffs"] == 1
        bad = await call(client, "get_plan", session_id=sid, cursor="garbage")
        assert bad.is_error


async def test_every_result_fits_the_output_schema_the_tool_lists(replay_dir: Path) -> None:
    """The output schemas describe the documents inside (not a bare object), and what the
    tools return fits them."""
    import jsonschema

    from captures import ingress_capture

    ingress_capture(replay_dir / "all.jsonl", allowed_by=True)
    async with Client(build_server(replay_dir), mode="legacy") as client:
        schemas = {t.name: t.output_schema for t in (await client.list_tools()).tools}
        sid = (await call(client, "start_session", replay_file="all.jsonl")).structured_content[
            "session_id"
        ]
        await wait_stopped(client, sid)
        policy = (await call(client, "list_policies", session_id=sid)).structured_content
        first = policy["policies"][0]
        answers = {
            "get_plan": await call(client, "get_plan", session_id=sid),
            "get_evidence": await call(
                client,
                "get_evidence",
                session_id=sid,
                namespace=first["namespace"],
                workload=first["workload"],
            ),
            "list_dropped_flows": await call(client, "list_dropped_flows", session_id=sid),
            "get_cluster_health": await call(client, "get_cluster_health", session_id=sid),
        }
        for tool, answer in answers.items():
            assert not answer.is_error, answer.content[0].text
            jsonschema.validate(answer.structured_content, schemas[tool])
        rule = schemas["get_evidence"]["properties"]["matched_rules"]["items"]
        assert {"flow_count", "peer", "port"} <= set(rule["properties"])
        would_break = schemas["get_plan"]["properties"]["would_break"]["items"]
        assert {"traffic", "why", "fix"} <= set(would_break["required"])
        bad = dict(answers["get_plan"].structured_content, would_break=[{"traffic": 1}])
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schemas["get_plan"])


async def test_evidence_takes_the_port_as_samples_give_it_and_descriptions_read_cleanly(
    replay_dir: Path,
) -> None:
    async with Client(build_server(replay_dir), mode="legacy") as client:
        tools = (await client.list_tools()).tools
        assert all("\n    " not in (tool.description or "") for tool in tools)
        sid = (await call(client, "start_session", replay_file="drops.jsonl")).structured_content[
            "session_id"
        ]
        await wait_stopped(client, sid)
        whole = (
            await call(client, "get_evidence", session_id=sid, namespace="shop", workload="cart")
        ).structured_content
        port = whole["matched_rules"][0]["port"]
        by_int = await call(
            client,
            "get_evidence",
            session_id=sid,
            namespace="shop",
            workload="cart",
            port=int(port),
        )
        by_text = await call(
            client,
            "get_evidence",
            session_id=sid,
            namespace="shop",
            workload="cart",
            port=str(port),
        )
        assert not by_int.is_error, by_int.content[0].text
        assert by_int.structured_content == by_text.structured_content
        outside = await call(client, "start_session", replay_file="/etc/passwd")
        assert outside.is_error and "relative paths only" not in outside.content[0].text
        assert "absolute one inside it" in outside.content[0].text
        inside = await call(client, "start_session", replay_file=str(replay_dir / "drops.jsonl"))
        assert not inside.is_error, inside.content[0].text  # absolute, inside the folder: fine


async def test_get_plan_says_when_it_cannot_judge(replay_dir: Path) -> None:
    (replay_dir / "drops-only.jsonl").write_text(jsonl([flow_dict(), flow_dict(tcp=9090)]))
    async with Client(build_server(replay_dir), mode="legacy") as client:
        sid = (
            await call(client, "start_session", replay_file="drops-only.jsonl")
        ).structured_content["session_id"]
        await wait_stopped(client, sid)
        plan = (await call(client, "get_plan", session_id=sid)).structured_content
        assert plan["verdict"] == "cannot_judge" and plan["would_break"] == []
        assert "cannot judge" in plan["message"]


async def test_get_plan_judges_the_sessions_policies_on_any_allowed_capture(
    replay_dir: Path,
) -> None:
    import captures as c

    drops = [flow_dict(c.WEB, c.api("v1", "api-v1-a"), tcp=8080) for _ in range(2)]
    (replay_dir / "drops-only.jsonl").write_text(jsonl(drops))
    c.ingress_capture(replay_dir / "every-verdict.jsonl")
    async with Client(build_server(replay_dir), mode="legacy") as client:
        sid = (
            await call(client, "start_session", replay_file="drops-only.jsonl")
        ).structured_content["session_id"]
        await wait_stopped(client, sid)
        own = (await call(client, "get_plan", session_id=sid)).structured_content
        assert own["verdict"] == "cannot_judge"
        judged = await call(client, "get_plan", session_id=sid, capture="every-verdict.jsonl")
        plan = judged.structured_content
        assert plan["verdict"] == "breaks" and plan["forwarded_flows"] == 12
        (broken,) = plan["would_break"]
        assert broken["traffic"]["source"] == "monitoring/prometheus"
        again = await call(client, "get_plan", session_id=sid)  # its own capture, still cached
        assert again.structured_content["verdict"] == "cannot_judge"
        outside = await call(client, "get_plan", session_id=sid, capture="/etc/passwd")
        assert outside.is_error and "capture must name a file inside" in outside.content[0].text


@pytest.mark.parametrize("mode", MODES)
async def test_explain_flow_and_trace_flow_answer_as_cpg_why(replay_dir: Path, mode: str) -> None:
    import captures as c

    c.ingress_capture(replay_dir / "all.jsonl")
    async with Client(build_server(replay_dir), mode=mode) as client:
        sid = (await call(client, "start_session", replay_file="all.jsonl")).structured_content[
            "session_id"
        ]
        await wait_stopped(client, sid)
        # the session's own policies admit its drops; the other port is what they miss
        answered = (await call(client, "explain_flow", session_id=sid)).structured_content
        # two api pods, one answer: the same thing said once, its flows added up
        assert answered["selected_flows"] == 2 and answered["total_count"] == 1
        assert answered["answers"][0]["flows"] == 2
        for one in answered["answers"]:
            assert one["allowed"] is True and one["policed_by"] == ["shop/cpg-api"]
        forwarded = await call(
            client, "explain_flow", session_id=sid, verdict="FORWARDED", from_label="app=prometheus"
        )
        (works,) = forwarded.structured_content["answers"]
        assert works["allowed"] is False  # the new policy would drop prometheus: it misses
        assert works["near_misses"][0]["misses"][0].startswith("peer: wants app=web")
        assert "io.kubernetes.pod.namespace: monitoring" in works["admit_yaml"]
        traced = await call(
            client,
            "trace_flow",
            session_id=sid,
            source="shop/web",
            destination="shop/api",
            port="9090/TCP",
        )
        egress, ingress = traced.structured_content["answers"]
        assert egress["direction"] == "egress" and egress["allowed"] is True  # web: not policed
        assert ingress["allowed"] is False and "port: TCP/9090 is not in TCP/8080" in str(ingress)
        bad = await call(
            client, "trace_flow", session_id=sid, source="web", destination="shop/api", port="80"
        )
        assert bad.is_error and "source" in bad.content[0].text
        bad = await call(client, "explain_flow", session_id=sid, from_pod="/")
        assert bad.is_error and "from_pod" in bad.content[0].text


async def test_start_session_learns_from_forwarded_traffic(replay_dir: Path) -> None:
    from captures import learn_capture

    learn_capture(replay_dir / "works.jsonl")
    async with Client(build_server(replay_dir), mode="legacy") as client:
        plain = (await call(client, "start_session", replay_file="works.jsonl")).structured_content
        await wait_stopped(client, plain["session_id"])
        none = await call(client, "list_policies", session_id=plain["session_id"])
        assert none.structured_content["total_count"] == 0  # nothing was denied
        learned = (
            await call(client, "start_session", replay_file="works.jsonl", learn="forwarded")
        ).structured_content
        await wait_stopped(client, learned["session_id"])
        listed = await call(client, "list_policies", session_id=learned["session_id"])
        names = sorted(p["workload"] for p in listed.structured_content["policies"])
        assert names == ["cart", "frontend"]
        bad = await call(client, "start_session", replay_file="works.jsonl", learn="everything")
        assert bad.is_error and "learn" in bad.content[0].text


def _shadow_folder(tmp_path: Path) -> tuple[Path, list[Any]]:
    """The allowed folder with a proposed policy (app=api) and the relay's flows: forwarded
    traffic to api-v2 pods the proposal would newly police."""
    from captures import ingress_capture
    from fake_relay import responses_from_lines

    allowed = tmp_path / "allowed"
    allowed.mkdir()
    capture = ingress_capture(tmp_path / "all.jsonl", allowed_by=True)
    ran = cpg("replay", str(capture), "-d", str(allowed / "proposed"), "--no-evidence")
    assert ran.returncode == 0, ran.stderr
    return allowed, responses_from_lines(capture.read_text().splitlines())


async def test_a_shadow_session_without_a_client(tmp_path: Path) -> None:
    """The session manager and the tool functions alone: get_plan answers so far while the
    stream runs, and the final plan after stop_session."""
    from cpg_mcp import tools
    from cpg_mcp.sessions import SessionManager
    from fake_relay import fake_relay

    allowed, responses = _shadow_folder(tmp_path)
    manager = SessionManager(allowed)
    with fake_relay(responses) as (_, address):
        started = await tools.start_session(
            manager, server=address, shadow_policies="proposed", flush_interval="1h"
        )
        session = manager.get(started.session_id)
        with anyio.fail_after(30):
            while tools.get_status(session).flows_seen != len(responses):
                await anyio.sleep(0.02)
        so_far = tools.get_plan(session)
        assert so_far.so_far is True and so_far.verdict == "breaks"
        assert so_far.would_break_flows == 12 and so_far.fixed == 2
        await manager.stop(started.session_id)
        final = tools.get_plan(session)
        assert final.so_far is None and final.would_break == so_far.would_break
        with pytest.raises(ToolError, match="leave capture and from_cluster out"):
            tools.get_plan(session, from_cluster=True)
        await manager.close()
    refused = SessionManager(allowed)
    with pytest.raises(ToolError, match="must name a folder inside"):
        await tools.start_session(refused, server="127.0.0.1:1", shadow_policies="../")
    with pytest.raises(ToolError, match="leave replay_file out"):
        await tools.start_session(refused, replay_file="x", shadow_policies="proposed")


async def test_tls_files_are_confined_and_say_nothing_of_other_files(
    tmp_path: Path, relay_cert: tuple[Path, Path]
) -> None:
    """tls_* name files inside the folder the operator allowed, and only there: a host file
    that exists and one that does not get the same answer (no oracle), and without the
    folder the arguments are refused."""
    _key, cert = relay_cert
    allowed = tmp_path / "tls"
    allowed.mkdir()
    (allowed / "ca.pem").write_bytes(cert.read_bytes())
    outside = tmp_path / "secret.pem"
    outside.write_text("not for clients")
    async with Client(build_server(None), mode="legacy") as client:
        off = await call(client, "start_session", server="127.0.0.1:1", tls_ca_cert="ca.pem")
        assert off.is_error and "--allow-tls-dir" in off.content[0].text
    async with Client(build_server(None, allow_tls_dir=allowed), mode="legacy") as client:
        answers = []
        for named in (str(outside), str(tmp_path / "absent.pem"), "../" * 12 + "etc/passwd"):
            result = await call(client, "start_session", server="127.0.0.1:1", tls_ca_cert=named)
            assert result.is_error
            answers.append(re.sub(r" \(trace [0-9a-f]+\)$", "", result.content[0].text))
        assert len(set(answers)) == 1, answers
        assert "must name a readable file inside" in answers[0]


async def test_a_heavy_call_past_its_deadline_is_killed_while_cheap_calls_answer(
    tmp_path: Path,
) -> None:
    """Plans over a capture too big for the deadline run in worker processes: each call
    ends at its deadline, its process is killed (no work runs on), and a cheap call made
    meanwhile answers before any of them (it is not queued behind the plans). That a plan
    which fits its deadline answers through the same lane, every other get_plan test shows."""
    import time

    from cpg_mcp import workers

    folder = tmp_path / "captures"
    folder.mkdir()
    flows = [
        flow_dict(
            src=endpoint(f"ns-{i % 40}", f"caller-{i}"),
            dst=endpoint("shop", f"svc-{i % 300}"),
            tcp=1000 + i % 5000,
            verdict="FORWARDED" if i % 2 else "DROPPED",
            reason=None if i % 2 else "POLICY_DENIED",
        )
        for i in range(40_000)  # about 4 CPU-s of planning: well past the deadline
    ]
    (folder / "big.jsonl").write_text(jsonl(flows))
    (folder / "one.jsonl").write_text(jsonl([flow_dict()]))
    deadline = 1.0
    async with Client(build_server(folder, tool_timeout=deadline), mode="legacy") as client:
        sid = (await call(client, "start_session", replay_file="one.jsonl")).structured_content[
            "session_id"
        ]
        await wait_stopped(client, sid)
        # The worker server is up (on a busy machine its start alone can take the deadline).
        await anyio.to_thread.run_sync(workers.run, "worded", ValueError())
        results: list[Any] = [None] * 4
        answered_at: list[float] = [0.0] * 4

        async def heavy(index: int) -> None:
            results[index] = await call(
                client, "get_plan", session_id=sid, capture="big.jsonl", policy_map_max=9000 + index
            )
            answered_at[index] = time.monotonic()

        cheap: list[Any] = []
        sent = time.monotonic()
        async with anyio.create_task_group() as group:
            for index in range(4):
                group.start_soon(heavy, index)
            await anyio.sleep(0.2)  # the plans are running
            cheap.append(await call(client, "list_policies", session_id=sid))
            cheap.append(time.monotonic())
        assert not cheap[0].is_error
        assert cheap[1] < min(answered_at)  # answered while the plans ran, not after them
        assert all(r.is_error and "did not finish within" in r.content[0].text for r in results)
        assert max(answered_at) - sent < deadline + 1.0
        with anyio.fail_after(2):  # killed, not left running
            while workers.running():
                await anyio.sleep(0.01)


async def test_at_500_workloads_every_result_fits_an_agents_context(tmp_path: Path) -> None:
    """benchmarks/synthetic.py's 500 workloads: get_report was 437 KB in one result and
    get_plan with limit 3 130 KB. Every result stays under 100 KB (about 25k tokens), every
    list is paged with its total, paging walks all of it, and paths are the session's own."""
    import sys

    from conftest import ROOT

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from cpg_mcp.server import _PlanSection, _ReportSection
    from cpg_mcp.tools import PLAN_LISTS
    from synthetic import synthetic_capture

    folder = tmp_path / "captures"
    folder.mkdir()
    synthetic_capture(folder / "capture.jsonl", 500)
    budget = 100_000
    async with Client(build_server(folder, tool_timeout=120), mode="legacy") as client:

        async def fitting(tool: str, **args: Any) -> dict[str, Any]:
            result = await call(client, tool, session_id=sid, **args)
            assert not result.is_error, result.content[0].text
            size = len(json.dumps(result.structured_content, ensure_ascii=False))
            assert size <= budget, (tool, args, size)
            return dict(result.structured_content)

        async def every_page(tool: str, **args: Any) -> list[dict[str, Any]]:
            pages = [await fitting(tool, **args)]
            while pages[-1].get("has_more"):
                pages.append(await fitting(tool, cursor=pages[-1]["next_cursor"], **args))
            return pages

        started = await call(client, "start_session", replay_file="capture.jsonl")
        sid = started.structured_content["session_id"]
        status = await wait_stopped(client, sid)
        assert status["policy_file_count"] == 260

        # the report: every page whole rows, all pages together the whole report
        pages = await every_page("get_report")
        assert len(pages) > 2 and all(p["total_count"] == pages[0]["total_count"] for p in pages)
        whole = "\n".join(p["markdown"] for p in pages)
        assert whole.count("```") % 2 == 0 and all(
            p["markdown"].count("```") % 2 == 0 for p in pages
        )
        names = [s["name"] for s in pages[0]["sections"]]
        assert set(names) <= set(get_args(get_args(_ReportSection)[0])[0].__args__)
        assert sum(s["characters"] for s in pages[0]["sections"]) < len(whole)
        policies = await every_page("get_report", section="policies")
        assert all(p["markdown"].startswith(("## Policies", "### ")) for p in policies)
        assert "\n".join(p["markdown"] for p in policies) in whole
        headed = [line for line in whole.splitlines() if line.startswith("### ")]
        assert sum("cpg-" in line for line in headed) == 260  # each policy, once (no "/" first)
        assert not any(line.startswith("### /") for line in headed)
        assert "## Allowed traffic" in whole and "```mermaid" in whole  # graphs too

        # the plan: every list paged, with the totals of all of them in each result
        plan = await fitting("get_plan")
        assert set(plan["totals"]) == set(PLAN_LISTS) == set(get_args(get_args(_PlanSection)[0]))
        for section in PLAN_LISTS:
            paged = await every_page("get_plan", section=section)
            items = [item for page in paged for item in page.get(section, [])]
            assert len(items) == plan["totals"][section] == paged[0]["total_count"], section
        assert plan["totals"]["confidence"] > 1_000  # 371 KB as one list

        # list_policies: paths relative to the session's folder, a real file in it
        listed = await every_page("list_policies", limit=200)
        rows = [row for page in listed for row in page["policies"]]
        assert len(rows) == 260
        tmp = Path(status["tmp_dir"])
        for row in rows:
            assert not row["path"].startswith("/") and (tmp / row["path"]).is_file()
        one = await fitting(
            "get_policy", namespace=rows[-1]["namespace"], workload=rows[-1]["workload"]
        )
        assert one["path"] == rows[-1]["path"]

        await every_page("get_cluster_health")
        await every_page("list_dropped_flows", limit=200)
        answers = await every_page("explain_flow", limit=100)
        assert sum(len(p["answers"]) for p in answers) == answers[0]["total_count"]
        stopped = await fitting("stop_session")
        assert not stopped["cluster_health_path"].startswith("/")


async def test_explain_flow_answers_a_page_within_its_deadline(
    replay_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unfiltered explain_flow on a large capture ran past the call's deadline. It
    answers the most frequent kinds of flow first and stops at its share of the deadline,
    saying how many it left and how to have them answered; here the share is 0, so it
    answers exactly the most frequent one."""
    from cpg_mcp import server

    async with Client(build_server(replay_dir), mode="legacy") as client:
        sid = (await call(client, "start_session", replay_file="drops.jsonl")).structured_content[
            "session_id"
        ]
        await wait_stopped(client, sid)
        whole = (await call(client, "explain_flow", session_id=sid, limit=100)).structured_content
        assert whole["total_count"] > 20 and "unanswered_flows" not in whole
        monkeypatch.setattr(server, "ANSWER_SHARE", 0.0)
        cut = await call(client, "explain_flow", session_id=sid, port="8443")
        assert not cut.is_error, cut.content[0].text
        page = cut.structured_content
        (answer,) = page["answers"]
        first_8443 = next(a for a in whole["answers"] if "TCP/8443" in a["traffic"])
        assert answer["traffic"].split(" [")[0] == first_8443["traffic"].split(" [")[0]
        assert page["unanswered_flows"] >= 2 and "narrow the filters" in page["message"]
        assert page["total_count"] == 1 and not page["has_more"]


async def test_the_inspector_smoke_script_expects_the_tools_the_server_lists() -> None:
    """scripts/inspector-smoke.sh (run by hand with the MCP Inspector, which npx fetches)
    expected 11 tools when there were 13: it checks the names the server lists now."""
    from conftest import ROOT

    script = (ROOT / "scripts" / "inspector-smoke.sh").read_text()
    check = script[script.index('check "tools/list') : script.index("mcpdo connect")]
    expected = set(re.findall(r"'([a-z_]+)'", check.split("sorted([", 1)[1].split("])", 1)[0]))
    async with Client(build_server(None), mode="legacy") as client:
        listed = {t.name for t in (await client.list_tools()).tools}
    assert expected == listed
    for tool in listed - {"start_session", "get_status", "stop_session", "get_bootstrap_policy"}:
        assert f"call {tool} " in script, f"the smoke script calls {tool}"
