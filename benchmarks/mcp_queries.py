"""Latency of the cpg-mcp query tools on a large session: ``python benchmarks/mcp_queries.py [N]``
(default 200,000 flows, which give 1,000 policies).

Generates the same capture as ``replay.py``, replays it in a cpg-mcp session through the SDK's
in-memory client (the real JSON-RPC loop), calls each query tool a few times and prints the
median and worst duration per tool from the server's own audit log.
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
    async with Client(build_server(folder, audit=audit), mode="legacy") as client:

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
        for row in listed["policies"][:20]:
            target = {"namespace": row["namespace"], "workload": row["workload"]}
            await call("get_policy", session_id=sid, **target)
            await call("get_evidence", session_id=sid, **target)
        for _ in range(10):
            await call("list_dropped_flows", session_id=sid, limit=200)
        await call("get_cluster_health", session_id=sid)
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
    for tool, values in durations.items():
        print(
            f"{tool:20} calls {len(values):3}  median {statistics.median(values):8.1f} ms"
            f"  max {max(values):8.1f} ms"
        )


if __name__ == "__main__":
    main()
