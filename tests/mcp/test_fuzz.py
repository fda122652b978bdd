"""Fuzz runs: a few thousand examples each over the JSON line reader and the
JSON-RPC framing. Neither may raise on any input; each answers in its documented way."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import flow_dict, jsonl
from cpg_core import Flow, ReadStats, feed_lines
from cpg_mcp.framing import check_frame

FUZZ = settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
_flow_text = jsonl([flow_dict(), flow_dict(udp=53, verdict="AUDIT")]).encode()


def _mutations() -> st.SearchStrategy[bytes]:
    """Real flow lines with bytes flipped, cut or spliced, and arbitrary bytes."""

    def mutate(data: bytes, where: int, junk: bytes, cut: bool) -> bytes:
        at = where % (len(data) + 1)
        return data[:at] + junk if cut else data[:at] + junk + data[at:]

    return st.builds(
        mutate, st.just(_flow_text), st.integers(min_value=0), st.binary(max_size=12), st.booleans()
    ) | st.binary(max_size=300)


@FUZZ
@given(data=_mutations())
def test_the_line_reader_never_fails_on_any_bytes(data: bytes) -> None:
    stats, flows = ReadStats(), []
    lines = data.split(b"\n")
    feed_lines(lines, 1, stats, __import__("cpg_core").FlowParser(), flows.append)
    assert all(isinstance(flow, Flow) for flow in flows)
    assert stats.lines_read == len(lines)
    assert len(flows) + stats.malformed + stats.blank_lines + stats.other_records <= len(lines)


def _frames() -> st.SearchStrategy[bytes]:
    message = st.fixed_dictionaries(
        {},
        optional={
            "jsonrpc": st.sampled_from(["2.0", "1.0", 2]) | _json,
            "id": st.integers() | st.text(max_size=8) | st.floats() | _json,
            "method": st.sampled_from(["initialize", "ping", "tools/call", "tools/list"]) | _json,
            "params": st.dictionaries(st.text(max_size=8), _json, max_size=3) | _json,
            "result": _json,
        },
    )
    encoded = (message | _json).map(lambda value: json.dumps(value).encode())
    return encoded | st.binary(max_size=120)


@FUZZ
@given(raw=_frames(), initialized=st.booleans())
def test_the_framing_answers_every_line_it_does_not_pass(raw: bytes, initialized: bool) -> None:
    frame = check_frame(raw, initialized)
    if frame is None:
        assert not raw.strip(b" \t\r\n")
        return
    if frame.error is not None:
        assert frame.text is None
        assert frame.error.error.code in (
            types.PARSE_ERROR,
            types.INVALID_REQUEST,
            types.INVALID_PARAMS,
        )
        assert len(frame.error.error.message) < 500, "a bad value is never echoed whole"
        return
    if frame.text is not None:
        types.jsonrpc_message_adapter.validate_json(frame.text, by_name=False)
        return
    # Dropped: a notification (no id) that could not be used; nobody waits for it.
    decoded: Any = json.loads(raw)
    assert isinstance(decoded, dict) and decoded.get("id") is None
