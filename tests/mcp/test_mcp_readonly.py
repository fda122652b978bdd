"""cpg-mcp is read-only: an audit hook records every file write, rename, removal and directory
creation during a replay session and a live session, and each one is inside a session's temp
dir. The Kubernetes client calls in the source are reads (get/list/watch) or a port-forward."""

from __future__ import annotations

import ast
import os
import re
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from conftest import EXAMPLE, ROOT
from cpg_mcp.server import build_server
from fake_relay import fake_relay, responses_from_lines

pytestmark = pytest.mark.anyio

WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
RECORDED = {
    "os.rename",
    "os.remove",
    "os.rmdir",
    "os.mkdir",
    "shutil.rmtree",
    "os.truncate",
    "os.link",
    "os.symlink",
    "os.chmod",
}


class WriteRecorder:
    """Audit hooks cannot be removed, so this one records only while ``active`` is set."""

    def __init__(self) -> None:
        self.active = threading.Event()
        self.events: list[tuple[str, Any, Any]] = []

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if not self.active.is_set():
            return
        if event == "open":
            path, mode, flags = args
            writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & WRITE_FLAGS
            )
            if writes and path is not None and not isinstance(path, int):
                self.events.append((event, os.fsdecode(path), None))
        elif event in RECORDED:
            for arg in args[:2] if event in ("os.rename", "os.link", "os.symlink") else args[:1]:
                if isinstance(arg, str | bytes | os.PathLike):
                    last = args[-1]
                    dir_fd = last if isinstance(last, int) and last >= 0 else None
                    self.events.append((event, os.fsdecode(arg), dir_fd))


RECORDER = WriteRecorder()
sys.addaudithook(RECORDER)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def run_sessions(client: Client, relay: str) -> list[Path]:
    tmp_dirs = []
    for args in ({"replay_file": "drops.jsonl"}, {"server": relay, "flush_interval": "1s"}):
        started = await client.call_tool("start_session", args)
        assert not started.is_error, started.content[0].text
        sid = started.structured_content["session_id"]
        status = (await client.call_tool("get_status", {"session_id": sid})).structured_content
        tmp_dirs.append(Path(status["tmp_dir"]).resolve())
        with anyio.fail_after(30):
            while (await client.call_tool("get_status", {"session_id": sid})).structured_content[
                "policy_file_count"
            ] < 6:
                await anyio.sleep(0.05)
        await client.call_tool("stop_session", {"session_id": sid})
        for tool in ("list_policies", "list_dropped_flows", "get_cluster_health"):
            assert not (await client.call_tool(tool, {"session_id": sid})).is_error
        for tool in ("get_policy", "get_evidence"):
            result = await client.call_tool(
                tool, {"session_id": sid, "namespace": "shop", "workload": "cart"}
            )
            assert not result.is_error
    return tmp_dirs


async def test_a_session_writes_only_inside_its_temp_dir(tmp_path: Path) -> None:
    captures = tmp_path / "captures"
    captures.mkdir()
    shutil.copy(EXAMPLE, captures / "drops.jsonl")
    responses = responses_from_lines(EXAMPLE.read_text().splitlines())
    with fake_relay(responses) as (_, address):
        tempfile.gettempdir()  # its one-off probe of /tmp is the standard library's, not ours
        from cpg_mcp import workers

        # so is the forkserver's socket, made once per process (by an earlier test, in a full
        # run; here when this test runs alone)
        workers.socket_folder()
        workers.start()
        RECORDER.events.clear()
        RECORDER.active.set()
        try:
            async with Client(build_server(captures), mode="legacy") as client:
                tmp_dirs = await run_sessions(client, address)
        finally:
            RECORDER.active.clear()
    events = list(RECORDER.events)
    assert any(e == "os.rename" for e, _, _ in events), "the hook saw the atomic writes"
    assert any(e == "shutil.rmtree" for e, _, _ in events), "and the cleanup"
    removed_trees = [Path(p).resolve() for e, p, _ in events if e == "shutil.rmtree"]
    assert set(removed_trees) == set(tmp_dirs)
    for event, path, dir_fd in events:
        if dir_fd is not None:  # relative to a directory rmtree walks: a bare entry name
            assert "/" not in path, (event, path)
            continue
        resolved = Path(path).resolve()
        assert any(resolved.is_relative_to(tmp) for tmp in tmp_dirs), (event, path)


KUBE_READ_VERBS = re.compile(
    r"^(list|read|get|watch)_|^connect_get_namespaced_pod_portforward$|^portforward$"
)


def test_kubernetes_calls_are_reads_or_a_port_forward() -> None:
    """Every attribute called on a Kubernetes API object in the source reads."""
    calls = set()
    for path in (ROOT / "src").rglob("*.py"):
        if "_proto" in path.parts:
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and re.search(
                r"_(namespaced|cluster)_|custom_object|portforward", node.attr
            ):
                calls.add(node.attr)
    assert calls, "the scan found the kube calls"
    assert all(KUBE_READ_VERBS.search(name) for name in calls), calls
