"""The cpg-mcp tools are plain functions over a session: called here without any MCP client,
they answer what the CLI answers for the same capture."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from conftest import EXAMPLE, cpg
from cpg_mcp import tools
from cpg_mcp.sessions import Session, SessionManager


def replayed(tmp_path: Path) -> tuple[SessionManager, Session]:
    folder = tmp_path / "captures"
    folder.mkdir()
    shutil.copy(EXAMPLE, folder / "drops.jsonl")
    manager = SessionManager(folder)

    async def run() -> Session:
        started = await tools.start_session(manager, replay_file="drops.jsonl", l7=False)
        session = tools.session_of(manager, started.session_id)
        assert session.task is not None
        await session.task  # the replay runs to its end
        await manager.stop(session.id)
        return session

    return manager, asyncio.run(run())


def test_the_tools_answer_what_the_cli_answers(tmp_path: Path) -> None:
    manager, session = replayed(tmp_path)
    try:
        assert tools.get_status(session).state == "stopped"
        listed = tools.list_policies(session, limit=200)
        assert [(p.namespace, p.workload) for p in listed.policies] == list(
            session.policy_store.targets()
        )
        assert listed.total_count == 6
        policy = tools.get_policy(session, namespace="shop", workload="cart")
        assert policy.yaml == (session.policies / "shop" / "cart.yaml").read_text()
        assert policy.path == "policies/shop/cart.yaml"  # relative to tmp_dir
        with pytest.raises(ToolError, match=r"no policy for shop/cartt; did you mean shop/cart\?"):
            tools.get_policy(session, namespace="shop", workload="cartt")

        # get_evidence's records are cpg explain --json's, for the same evidence.
        evidence = tools.get_evidence(session, namespace="shop", workload="cart", port="8080")
        explained = cpg(
            "explain",
            "shop/cart",
            "-d",
            str(session.policies),
            "--evidence-dir",
            str(session.evidence_root),
            "--port",
            "8080",
            "--json",
        )
        assert explained.returncode == 0, explained.stderr
        record = json.loads(explained.stdout)
        assert evidence.matched_rules == record["matched_rules"]
        assert evidence.policy == record["policy"]

        rows = tools.list_dropped_flows(session, namespace="shop", limit=200)
        assert rows.samples and all(s.namespace == "shop" for s in rows.samples)
        health = tools.get_cluster_health(session)
        assert health.report is not None and health.report["lost_events"] == 3
        summary = tools.stop_summary(session, already_stopped=True)
        assert summary.flows_seen == 64 and summary.policies_written == 6
    finally:
        manager.discard()
    assert not session.tmp.exists()


def test_the_tools_validate_as_the_cli_does(tmp_path: Path) -> None:
    manager, session = replayed(tmp_path)
    try:
        for bad, message in (
            ({"port": "http"}, "port: 'http' is not a port number"),
            ({"port": "70000"}, "not a port number"),
            ({"peer": "app"}, "peer: 'app' is not KEY=VALUE"),
            ({"direction": "sideways"}, "not a direction"),
        ):
            with pytest.raises(ToolError, match=message):
                tools.get_evidence(session, namespace="shop", workload="cart", **bad)
        with pytest.raises(ToolError, match=r"namespace '\.\./etc' is not valid"):
            tools.get_policy(session, namespace="../etc", workload="cart")
    finally:
        manager.discard()

    async def bad_start() -> None:
        await tools.start_session(manager, ignore_protocols=["http"])

    with pytest.raises(ToolError, match="ignore_protocols: unknown protocol 'http'"):
        asyncio.run(bad_start())
    with pytest.raises(ToolError, match="timeout: '99999999999999999999d' is too long"):
        asyncio.run(tools.start_session(manager, timeout="99999999999999999999d"))


def test_closing_cancels_a_running_replay_before_removing_its_folder(tmp_path: Path) -> None:
    from conftest import endpoint, flow_dict, jsonl

    folder = tmp_path / "captures"
    folder.mkdir()
    block = jsonl(
        [flow_dict(dst=endpoint("shop", f"svc-{i % 500}"), tcp=8000 + i % 9) for i in range(4000)]
    )
    (folder / "big.jsonl").write_text(block * 40)  # seconds of work
    manager = SessionManager(folder)

    async def run() -> Session:
        started = await tools.start_session(manager, replay_file="big.jsonl")
        session = tools.session_of(manager, started.session_id)
        await asyncio.sleep(0)  # the replay thread starts
        await manager.close()
        return session

    session = asyncio.run(run())
    assert session.task is not None and session.task.done(), "stopped before the folder went"
    assert session.result is None, "the replay was cancelled, not waited for"
    assert "stopped before it finished" in session.error
    assert not session.tmp.exists() and manager.closed.is_set()


def test_stop_session_ends_an_unfinished_replay_at_once(tmp_path: Path) -> None:
    from conftest import endpoint, flow_dict, jsonl

    folder = tmp_path / "captures"
    folder.mkdir()
    block = jsonl(
        [flow_dict(dst=endpoint("shop", f"svc-{i % 500}"), tcp=8000 + i % 9) for i in range(4000)]
    )
    (folder / "big.jsonl").write_text(block * 40)
    manager = SessionManager(folder)

    async def run() -> tuple[Session, Any]:
        started = await tools.start_session(manager, replay_file="big.jsonl")
        session = tools.session_of(manager, started.session_id)
        await asyncio.sleep(0)
        await asyncio.wait_for(manager.stop(session.id), 5)  # no waiting for the whole replay
        return session, tools.stop_summary(session, already_stopped=False)

    try:
        session, summary = asyncio.run(run())
        assert session.result is None and summary.error is not None
        assert "stopped before it finished" in summary.error
    finally:
        manager.discard()


def test_start_session_says_what_it_reads(tmp_path: Path) -> None:
    folder = tmp_path / "captures"
    folder.mkdir()
    shutil.copy(EXAMPLE, folder / "drops.jsonl")
    manager = SessionManager(folder)

    async def run() -> Any:
        started = await tools.start_session(manager, replay_file="drops.jsonl")
        session = tools.session_of(manager, started.session_id)
        assert session.task is not None
        await session.task
        return started

    try:
        started = asyncio.run(run())
        assert started.server is None
        assert started.replay_file is not None and started.replay_file.endswith("drops.jsonl")
    finally:
        manager.discard()


def test_errors_name_what_an_agent_can_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing-kubeconfig"))
    manager = SessionManager(None)

    async def run() -> str:
        with pytest.raises(ToolError) as refused:
            await tools.start_session(manager, timeout="2s")
        return str(refused.value)

    try:
        message = asyncio.run(run())
    finally:
        manager.discard()
    assert "--" not in message, message
    assert "KUBECONFIG" in message and "server" in message


def test_the_read_tools_index_a_stopped_session_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Built when the session stops (on_stopped), the index answers every later call: the
    files are not read again per call, and the answers are what reading them gives."""
    folder = tmp_path / "captures"
    folder.mkdir()
    shutil.copy(EXAMPLE, folder / "drops.jsonl")
    manager = SessionManager(folder, on_stopped=tools.warm)

    async def run() -> Session:
        started = await tools.start_session(manager, replay_file="drops.jsonl", l7=False)
        session = tools.session_of(manager, started.session_id)
        assert session.task is not None
        await session.task
        return session

    session = asyncio.run(run())
    try:
        assert session.state == "stopped" and {"policy rows", "samples", "health"} <= set(
            session.memos
        )
        reads: list[str] = []
        real_read_all, real_read = type(session.evidence_store).read_all, tools._policy_row
        monkeypatch.setattr(
            type(session.evidence_store),
            "read_all",
            lambda store, *a, **k: reads.append("evidence") or real_read_all(store, *a, **k),
        )
        monkeypatch.setattr(
            tools, "_policy_row", lambda *a: reads.append("policy") or real_read(*a)
        )
        first = [tools.list_dropped_flows(session, limit=200) for _ in range(3)]
        listed = [tools.list_policies(session, limit=2, cursor=None) for _ in range(3)]
        health = [tools.get_cluster_health(session) for _ in range(3)]
        assert reads == [], "every call answered from the index"
        assert first[0] == first[2] and listed[0] == listed[2] and health[0] == health[2]
        assert listed[0].total_count == 6 and len(listed[0].policies) == 2
        # the same answers as reading the files afresh
        session.memos.clear()
        assert tools.list_dropped_flows(session, limit=200) == first[0]
        assert tools.list_policies(session, limit=2) == listed[0]
        assert "evidence" in reads and "policy" in reads
    finally:
        manager.discard()


def test_an_index_is_kept_until_the_files_change(tmp_path: Path) -> None:
    """What the tools derive is kept while the session's folders are unchanged (a flush, or
    anything else writing there, changes them); a replay still writing keeps nothing."""
    session = Session(id="s", tmp=tmp_path, source="live")
    (tmp_path / "policies" / "shop").mkdir(parents=True)
    built: list[int] = []

    def build() -> int:
        built.append(1)
        return len(built)

    assert session.memo("k", build) == 1 and session.memo("k", build) == 2  # a replay writing
    session.stopped = 1.0
    assert session.memo("k", build) == 3 and session.memo("k", build) == 3
    (tmp_path / "policies" / "shop" / "cart.yaml").write_text("x")  # the files changed
    assert session.memo("k", build) == 4 and session.memo("k", build) == 4
