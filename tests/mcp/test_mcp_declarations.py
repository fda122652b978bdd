"""cpg-mcp takes what the cluster declares (``declarations``, files only from the folder the
operator allowed, or ``cluster``): its policies keep each declared dependency open, and a
plan of a folder that denies one lists it with the declaring object."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from conftest import flow_dict, jsonl
from declared_objects import istio_webhook, write_objects

GALLEY = {
    "namespace": "istio-system",
    "labels": [
        "k8s:app=galley",
        "k8s:istio=galley",
        "k8s:io.kubernetes.pod.namespace=istio-system",
    ],
}
TELEMETRY = {
    "namespace": "istio-system",
    "labels": ["k8s:app=telemetry", "k8s:io.kubernetes.pod.namespace=istio-system"],
}


def test_a_session_keeps_what_the_cluster_declares_and_its_plan_names_it(tmp_path: Path) -> None:
    from cpg_mcp.server import build_server

    allowed = tmp_path / "captures"
    allowed.mkdir()
    records = [
        flow_dict(TELEMETRY, GALLEY, tcp=9901),  # a drop: galley is policed for ingress
        flow_dict(TELEMETRY, GALLEY, tcp=9901, verdict="FORWARDED", reason=None),
    ]
    (allowed / "drops.jsonl").write_text(jsonl(records))
    shutil.copy(write_objects(tmp_path / "objects", istio_webhook()), allowed / "objects.yaml")

    async def run(declarations: list[str]) -> tuple[Any, Any, Any]:
        async with Client(build_server(allowed), mode="legacy") as client:
            started = await client.call_tool(
                "start_session",
                {"replay_file": "drops.jsonl", "declarations": declarations, "catalogue": ["none"]},
            )
            if started.is_error:
                return started, None, None
            sid = started.structured_content["session_id"]
            for _ in range(400):
                status = await client.call_tool("get_status", {"session_id": sid})
                if status.structured_content["state"] == "stopped":
                    break
                await anyio.sleep(0.05)
            policy = await client.call_tool(
                "get_policy", {"session_id": sid, "namespace": "istio-system", "workload": "galley"}
            )
            report = await client.call_tool(
                "get_report", {"session_id": sid, "section": "policies"}
            )
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            schema = str(tools["get_plan"].model_dump())
            return started, policy, (report, schema)

    outside, _, _ = anyio.run(run, ["../objects/cluster-objects.yaml"])
    assert outside.is_error and "declarations must name a file inside" in outside.content[0].text
    _, policy, (report, schema) = anyio.run(run, ["objects.yaml"])
    text = policy.structured_content["yaml"]
    assert "declared by ValidatingWebhookConfiguration istio-galley (TCP/9443)" in text
    # the report shows the rule as declared, and a plan's would-break items name the object
    assert "declared by ValidatingWebhookConfiguration istio-galley" in str(
        report.structured_content
    )
    assert "declared_by" in schema
    _, policy, _ = anyio.run(run, [])
    assert "kube-apiserver" not in policy.structured_content["yaml"]
