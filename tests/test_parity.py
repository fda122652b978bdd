"""The two roots take the same run options: every field of RunRequest is a flag of cpg replay
or cpg generate and an argument of cpg-mcp's start_session, or is listed here with the reason
it is not; and every start_session argument is something the CLI can set too."""

from __future__ import annotations

import inspect
from typing import Any

import anyio
import pytest
from mcp import Client

from cpg_cli.app import load_command
from cpg_cli.words import flag
from cpg_core import RunRequest
from cpg_mcp.server import build_server
from cpg_mcp.words import argument

NOT_A_TOOL_ARGUMENT = {
    "evidence": "a session always records evidence: its query tools serve it",
    "evidence_sessions": "a session's folder only ever holds that one session",
    "dry_run": "a session writes only into its own private folder; there is nothing to protect",
    "diff": "a diff belongs to a dry run",
    "exit_code": "no process exits; stop_session returns the counts",
    "kustomize": "no one applies a session's temp folder with kubectl -k",
    "fail_on_infra_drops": "an exit code; stop_session returns infra_drop_total instead",
    "verify": "an exit-code check of written files; get_plan answers for a session",
    "engine": "a session replays inside the server's process; it starts no cluster for an agent",
    "jobs": "as engine: the server forks no workers for an agent",
    "scheduler": "as engine",
    "part_size": "as engine",
    "stable_for": "a session's policies are read through its tools, never applied from its "
    "folder: rewriting its files as rules arrive churns nothing anyone reviews",
    "flow_filter": "a session replays its capture whole, so every query sees all of it; "
    "explain_flow takes the same filters per question",
}
"""RunRequest fields cpg-mcp's start_session does not take, each with its reason."""

TOOL_ONLY = {
    "replay_file": "replay",  # cpg replay takes its capture files as arguments
    "shadow_policies": "shadow",
    "tls": "generate",
    "tls_ca_cert": "generate",
    "tls_client_cert": "generate",
    "tls_client_key": "generate",
    "tls_server_name": "generate",
}
"""start_session arguments that are not RunRequest fields: the CLI command that covers each."""


def _request_fields() -> list[str]:
    return list(inspect.signature(RunRequest.build).parameters)


def _flags(name: str) -> set[str]:
    sub = load_command(name)
    return {opt for param in sub.params for opt in (*param.opts, *param.secondary_opts)}


def _tool_arguments() -> set[str]:
    async def listed() -> Any:
        async with Client(build_server(None), mode="legacy") as client:
            return (await client.list_tools()).tools

    tools = anyio.run(listed)
    start = next(tool for tool in tools if tool.name == "start_session")
    return set(start.input_schema["properties"])


@pytest.fixture(scope="module")
def tool_arguments() -> set[str]:
    return _tool_arguments()


def test_every_run_option_is_a_flag_of_replay_or_generate() -> None:
    flags = _flags("replay") | _flags("generate")
    missing = [
        field
        for field in _request_fields()
        if not any(part in flags for part in flag(field).split("/"))
    ]
    assert not missing, f"RunRequest fields no CLI flag sets: {missing}"


def test_every_run_option_is_a_start_session_argument_or_listed(
    tool_arguments: set[str],
) -> None:
    for field in _request_fields():
        if field in NOT_A_TOOL_ARGUMENT:
            assert argument(field) not in tool_arguments, f"{field} is listed but offered"
        else:
            assert argument(field) in tool_arguments, f"start_session lacks {field}"


def test_start_session_takes_the_time_window_and_min_flows(tool_arguments: set[str]) -> None:
    assert {"since", "until", "min_flows"} <= tool_arguments


def test_every_start_session_argument_is_something_the_cli_sets(
    tool_arguments: set[str],
) -> None:
    fields = {argument(field): field for field in _request_fields()}
    for name in sorted(tool_arguments):
        if name in fields:
            continue
        assert name in TOOL_ONLY, f"start_session's {name} is neither a run option nor listed"
        command = TOOL_ONLY[name]
        if name != "replay_file":
            spelled = flag(name).split()[0]  # "--tls flags" in a message is the flag --tls
            assert spelled in _flags(command), f"cpg {command} has no {spelled}"


def test_the_lists_name_only_real_fields() -> None:
    assert set(NOT_A_TOOL_ARGUMENT) <= set(_request_fields())
