"""The two roots take the same options because both read them from one table
(``cpg_core.options.OPTIONS``): every keyword of the request builders is an entry, every entry
is a flag of each command it names and an argument of cpg-mcp's start_session (or says why a
server for agents does not take it), and nothing else is either."""

from __future__ import annotations

import inspect
from typing import Any

import anyio
import pytest
from mcp import Client

from cpg_cli.app import load_command
from cpg_cli.words import flag
from cpg_core import CheckRequest, RunRequest
from cpg_core.options import OPTIONS, options_of
from cpg_mcp.server import build_server

NOT_AN_OPTION = {
    RunRequest: {
        "flow_filter": "the filter flags (hubble observe's) are declared apart, as FLOW_FILTERS"
    },
    CheckRequest: {
        "inputs": "each command takes its capture as arguments",
        "policies": "each command says in its own words which folder -d is",
    },
}
"""Request builder keywords that are not table entries, each with its reason."""

TOOL_ONLY = {
    "replay_file": "replay",
    "shadow_policies": "shadow",
    "host_firewall": "trace",
    "dual_stack": "trace",
}
"""start_session arguments that are not table entries: the CLI command that covers each (a
session's agent settings are what each check command takes as its own flags)."""


def _checked_by(entry: Any) -> frozenset[str]:
    return entry.checked.commands if entry.checked is not None else frozenset()


COMMANDS = sorted({command for entry in OPTIONS for command in entry.commands | _checked_by(entry)})


def _keywords(builder: type) -> set[str]:
    """The keywords a request builder takes: its parameters, or, for a builder that takes
    the option table's names (``**values``), those names (each accepted, and nothing
    else)."""
    parameters = inspect.signature(builder.build).parameters  # type: ignore[attr-defined]
    named = {n for n, p in parameters.items() if p.kind is not inspect.Parameter.VAR_KEYWORD}
    if len(named) == len(parameters):
        return named
    request = "run" if builder is RunRequest else "check"
    required = {} if builder is RunRequest else {"inputs": ["capture.jsonl"]}
    table = {o.name: o.default_in(request) for o in OPTIONS if request in o.requests}
    for name, default in table.items():
        builder.build(**required, **{name: default})  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="no_such_option"):
        builder.build(**required, no_such_option=1)  # type: ignore[attr-defined]
    return named | set(table)


def _params(command: str) -> dict[str, Any]:
    return {param.name: param for param in load_command(command).params}


def _tools() -> dict[str, dict[str, Any]]:
    async def listed() -> Any:
        async with Client(build_server(None), mode="legacy") as client:
            return (await client.list_tools()).tools

    return {tool.name: tool.input_schema["properties"] for tool in anyio.run(listed)}


@pytest.fixture(scope="module")
def tools() -> dict[str, dict[str, Any]]:
    return _tools()


@pytest.mark.parametrize(
    ("builder", "request_name"), [(RunRequest, "run"), (CheckRequest, "check")]
)
def test_every_request_keyword_is_one_table_entry(builder: type, request_name: str) -> None:
    entries = {o.name for o in OPTIONS if request_name in o.requests}
    assert entries == _keywords(builder) - set(NOT_AN_OPTION[builder])


def test_no_option_is_declared_twice() -> None:
    """A check command takes a run's setting through its entry's ``checked``, in its own
    words: the name, flag, kind and tool argument stand once."""
    names = [o.name for o in OPTIONS]
    assert len(names) == len(set(names)), "an option is declared twice"
    for entry in OPTIONS:
        assert not entry.commands & _checked_by(entry), entry.name


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_takes_exactly_its_table_entries(command: str) -> None:
    params = _params(command)
    for entry in options_of(command):
        param = params.get(entry.parameter)
        assert param is not None, f"cpg {command} lacks {entry.flags[-1]}"
        assert set(entry.flags) <= {*param.opts, *param.secondary_opts}
        assert param.help == entry.help_for(command)
        assert (param.envvar or "") == entry.envvar_for(command)
    taken = {entry.parameter for entry in options_of(command)}
    assert len(taken) == len(options_of(command))
    for name, param in params.items():
        spelled = {*param.opts, *param.secondary_opts}
        for entry in OPTIONS:
            if name not in taken and entry.parameter == name and set(entry.flags) & spelled:
                pytest.fail(f"cpg {command} declares {entry.flags[-1]} itself, not from the table")


def test_every_run_entry_is_a_flag_of_a_capture_command() -> None:
    """Every setting of a run request can be given on the command line: replay and generate
    take run requests, and so does shadow (its live capture; the cap on kinds it judges)."""
    flags = {
        spelled
        for command in ("replay", "generate", "shadow")
        for param in load_command(command).params
        for spelled in (*param.opts, *param.secondary_opts)
    }
    for entry in OPTIONS:
        if entry.request == "run":
            assert set(entry.flags) & flags, f"no capture command takes {entry.name}"


def test_start_session_offers_the_table_and_says_why_not(tools: dict[str, Any]) -> None:
    arguments = tools["start_session"]
    for entry in OPTIONS:
        if entry.request not in ("run", "relay"):
            continue
        if entry.tool:
            assert not entry.not_tool
            assert arguments[entry.tool]["description"] == entry.tool_help
        else:
            assert entry.not_tool, f"{entry.name}: neither a tool argument nor a reason"
            assert entry.name not in arguments
    offered = {o.tool for o in OPTIONS if o.tool and o.request in ("run", "relay")}
    assert set(arguments) - offered == set(TOOL_ONLY)


def test_every_tool_only_argument_has_a_cli_command(tools: dict[str, Any]) -> None:
    for name, command in TOOL_ONLY.items():
        assert name in tools["start_session"]
        assert command in load_command(command).name


def test_every_check_argument_a_tool_offers_is_the_table_entry(tools: dict[str, Any]) -> None:
    for entry in OPTIONS:
        if "check" in entry.requests and entry.tool:
            offering = [name for name, arguments in tools.items() if entry.tool in arguments]
            assert offering, f"no tool offers {entry.tool}"
            for name in offering:
                assert tools[name][entry.tool]["description"] == entry.tool_help, name


def test_a_flag_named_in_an_error_is_a_flag_a_command_takes() -> None:
    spelled = {
        s
        for command in COMMANDS
        for param in load_command(command).params
        for s in (*param.opts, *param.secondary_opts)
    }
    for entry in OPTIONS:
        assert flag(entry.name).split()[0].split("/")[0] in spelled | {"-n"}, entry.name


PART_DEFAULTS = {
    "policy_default_local_cluster": (True, "true"),
    "allow_localhost": (True, "always"),
    "evidence_interval": (None, "1m"),
}
"""Where a part's builder says a default its own way (the flag's word, or None for the
part's own default): (the builder's, the table's)."""


def test_a_parts_builder_defaults_each_option_as_the_table_does() -> None:
    """The run request hands each part (the capture, the live window) the table's values by
    its builder's keywords; a builder called on its own (a notebook, the run layer) defaults
    them as the table does, so a default is said once, and a change to it fails here."""
    from cpg_core._requests.requests import CaptureRequest, LiveRequest

    table = {o.name: o.default_in("run") for o in OPTIONS if "run" in o.requests}
    for builder in (CaptureRequest.build, LiveRequest.build):
        for name, parameter in inspect.signature(builder).parameters.items():
            if name == "max_samples":  # from evidence_samples, by the run request
                continue
            ours = parameter.default
            if name in PART_DEFAULTS:
                assert (ours, table[name]) == PART_DEFAULTS[name], name
            else:
                assert ours == table[name] or (ours is None and table[name] == ()), name
