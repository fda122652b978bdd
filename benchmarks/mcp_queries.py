"""Latency of the cpg-mcp query tools on a large session: ``python benchmarks/mcp_queries.py [N]``
(default 200,000 flows, which give 1,000 policies; the issue's figure is at 1,000,000).

Generates the same capture as ``replay.py``, replays it in a cpg-mcp session through the SDK's
in-memory client (the real JSON-RPC loop), calls each read tool 20 times (pages, targets and
filters varying as an assistant's would) and prints p50, p95 and the worst duration per tool
from the server's own audit log; get_plan's first call (which makes the plan) is shown apart
from the calls that find it made. Compare builds by running this file with PYTHONPATH set to
each build's src.
"""

from __future__ import annotations

import io
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

sys.path.insert(0, str(Path(__file__).parent))
from cpg_mcp.audit import AuditLog
from cpg_mcp.server import build_server
from replay import generate


async def drive(folder: Path, audit: AuditLog) -> dict[str, Any]:
    async with Client(build_server(folder, audit=audit, tool_timeout=600), mode="legacy") as client:

        async def call(tool: str, **args: Any) -> dict[str, Any]:
            result = await client.call_tool(tool, args)
            if result.is_error:
                sys.exit(f"{tool} failed: {result.content[0].text}")
            return result.structured_content

        sid = (await call("start_session", replay_file="flows.jsonl"))["session_id"]
        while (await call("get_status", session_id=sid))["state"] != "stopped":
            await anyio.sleep(0.1)
        stop = await call("stop_session", session_id=sid)
        listed = await call("list_policies", session_id=sid, limit=200)
        targets = [
            {"namespace": r["namespace"], "workload": r["workload"]} for r in listed["policies"]
        ]
        cursor = listed.get("next_cursor")
        for n in range(19):
            page = await call(
                "list_policies",
                session_id=sid,
                limit=50,
                **({"cursor": cursor} if cursor and n % 2 else {}),
            )
            cursor = page.get("next_cursor") or cursor
        for target in targets[:20]:
            await call("get_policy", session_id=sid, **target)
            await call("get_evidence", session_id=sid, **target)
        namespaces = sorted({t["namespace"] for t in targets})
        for n in range(20):
            filters = {"namespace": namespaces[n % len(namespaces)]} if n % 2 else {}
            await call("list_dropped_flows", session_id=sid, limit=200, **filters)
        for _ in range(20):
            await call("get_cluster_health", session_id=sid)
        for _ in range(21):
            await call("get_plan", session_id=sid)
        return stop


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    folder = Path(tempfile.mkdtemp(prefix="cpg-bench-mcp-"))
    try:
        generate(folder / "flows.jsonl", count)
        sink = io.StringIO()
        stop = anyio.run(drive, folder, AuditLog(sink))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"{stop['flows_seen']:,} flows, {stop['policies_written']:,} policies")
    durations: dict[str, list[float]] = {}
    for line in sink.getvalue().splitlines():
        record = json.loads(line)
        durations.setdefault(record["tool"], []).append(record["duration_ms"])
    if "get_plan" in durations:
        durations["get_plan (first)"] = durations["get_plan"][:1]
        durations["get_plan"] = durations["get_plan"][1:]
    for tool, values in durations.items():
        if tool in ("start_session", "get_status", "stop_session"):
            continue
        ordered = sorted(values)
        p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
        print(
            f"{tool:20} calls {len(values):3}  p50 {statistics.median(values):8.1f} ms"
            f"  p95 {p95:8.1f} ms  max {max(values):8.1f} ms"
        )


if __name__ == "__main__":
    main()
