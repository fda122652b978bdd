"""cpg-mcp in process, through the SDK client in both modes (legacy JSON-RPC and direct)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from conftest import EXAMPLE, endpoint, flow_dict, jsonl
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
    evil = flow_dict(src=endpoint("shop", "web\x1b[31mred\x1b[0m"), dst=endpoint("shop", "evil"))
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
        }
        for tool in tools.values():
            assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", tool.name)
            assert tool.description and tool.output_schema
        assert tools["get_policy"].annotations.read_only_hint is True
        assert tools["get_policy"].annotations.open_world_hint is False
        started = (
            await call(client, "start_session", replay_file="drops.jsonl")
        ).structured_content
        sid = started["session_id"]
        assert sid.startswith("sess_") and len(sid) > 30
        status = await wait_stopped(client, sid)
        assert status["policy_file_count"] == 6 and status["evidence_file_count"] == 6
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
        again = (await call(client, "stop_session", session_id=sid)).structured_content
        assert again["already_stopped"] is True
        health = (await call(client, "get_cluster_health", session_id=sid)).structured_content
        assert {d["reason"] for d in health["report"]["drops"]} >= {"CT_MAP_INSERTION_FAILED"}
        tmp = Path(status["tmp_dir"])
        assert tmp.is_dir() and (tmp.stat().st_mode & 0o777) == 0o700
    assert not tmp.exists(), "the session dir goes when the server stops"


@pytest.mark.parametrize("mode", MODES)
async def test_errors_are_readable_tool_errors(replay_dir: Path, mode: str) -> None:
    async with Client(build_server(replay_dir), mode=mode) as client:
        unknown = await call(client, "get_status", session_id="sess_nope")
        assert unknown.is_error and "not found or expired" in unknown.content[0].text
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
        text = json.dumps(evidence.structured_content) + evidence.content[0].text
        assert "\x1b" not in text and "\\u001b" not in text
        assert "[31mred" in text


async def test_bootstrap_policy_tool() -> None:
    async with Client(build_server(None), mode="legacy") as client:
        ok = (await call(client, "get_bootstrap_policy", namespace="shop")).structured_content
        assert (
            ok["yaml"].startswith("apiVersion: cilium.io/v2") and "default-deny-shop" in ok["yaml"]
        )
        bad = await call(client, "get_bootstrap_policy", namespace="../etc")
        assert bad.is_error
