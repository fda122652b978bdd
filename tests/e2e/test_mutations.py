"""Real records, mutated, through the commands (issue 42): every field of a sample of real
Hubble records dropped, nulled, given another type, an unknown enum value or a huge value,
one mutation a line, fed through replay (plain, --l7, learning), verify, plan, why and drift.
No traceback, ever (an exception fails the test: the commands run in process), and every
command ends with one of its documented exit codes. A hypothesis test mixes several
mutations in one record."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import CORPUS, EXAMPLE, cpg

Path_ = tuple[str | int, ...]


def _records() -> list[dict[str, Any]]:
    """One record of each shape the corpus and the example hold (verdict, L4, L7 kind)."""
    seen: dict[tuple[Any, ...], dict[str, Any]] = {}
    sources = sorted(CORPUS.glob("*.json*")) if CORPUS.exists() else []
    for path in [EXAMPLE, *sources]:
        for line in path.read_text().splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            flow = record.get("flow") if isinstance(record, dict) else None
            if not isinstance(flow, dict):
                continue
            shape = (
                flow.get("verdict"),
                tuple(sorted((flow.get("l4") or {}).keys())),
                tuple(sorted(k for k in (flow.get("l7") or {}) if k in ("http", "dns"))),
                flow.get("traffic_direction"),
                "world" in json.dumps(flow.get("destination", {})),
            )
            seen.setdefault(shape, record)
    return list(seen.values())


RECORDS = _records()


def _paths(node: Any, path: Path_ = ()) -> Iterator[Path_]:
    yield path
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*path, key))
    elif isinstance(node, list):
        for n, item in enumerate(node[:3]):
            yield from _paths(item, (*path, n))


def _get(node: Any, path: Path_) -> Any:
    for part in path:
        node = node[part]
    return node


def _set(record: dict[str, Any], path: Path_, value: Any, delete: bool = False) -> dict[str, Any]:
    out = copy.deepcopy(record)
    parent = _get(out, path[:-1])
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return out


def _mutations(value: Any) -> list[Any]:
    """What a field becomes: null, another type, an unknown enum value, a huge value."""
    out: list[Any] = [None, [], {}, True]
    if isinstance(value, str):
        out += [7, "", "BOGUS_ENUM_VALUE" if value.isupper() else "x" * 70_000, "\u202e\x00"]
    elif isinstance(value, bool):
        out += ["yes", 0]
    elif isinstance(value, int):
        out += [str(value), -1, 2**70, 1.5]
    elif isinstance(value, list):
        out += ["a-string", [None], [{}], list(range(200))]
    elif isinstance(value, dict):
        out += ["a-string", [value]]
    return out


def mutated(record: dict[str, Any]) -> list[dict[str, Any]]:
    lines = []
    for path in _paths(record):
        if not path:
            continue
        lines.append(_set(record, path, None, delete=True))
        for value in _mutations(_get(record, path)):
            lines.append(_set(record, path, value))
    return lines


def _run_all(capture: Path, tmp_path: Path) -> None:
    out = tmp_path / "p"
    for flags in ((), ("--l7",), ("--learn", "forwarded", "--l7")):
        ran = cpg(
            "replay",
            str(capture),
            "-d",
            str(out),
            "--no-evidence",
            "--max-malformed",
            "100",
            *flags,
        )
        assert ran.returncode in (0, 1), ran.stderr[-1500:]
    for command, codes in (
        ("verify", (0, 1, 3, 4)),
        ("plan", (0, 1, 3, 4)),
        ("why", (0, 1, 3)),
        ("drift", (0, 1, 3, 4)),
    ):
        ran = cpg(command, str(capture), "-d", str(out), "-o", "json")
        assert ran.returncode in codes, (command, ran.returncode, ran.stderr[-1500:])
        if ran.returncode != 1:
            json.loads(ran.stdout)


@pytest.mark.skipif(not RECORDS, reason="no record to mutate")
@pytest.mark.parametrize("index", range(len(RECORDS)))
def test_every_field_of_a_real_record_mutated(index: int, tmp_path: Path) -> None:
    record = RECORDS[index]
    lines = mutated(record)
    capture = tmp_path / "mutated.jsonl"
    # the record itself between the mutations: a capture mostly malformed is refused, and the
    # mutations that still parse must meet the rest of the pipeline
    body = [json.dumps(line) for one in lines for line in (one, record)]
    capture.write_text("\n".join(body) + "\n")
    _run_all(capture, tmp_path)


@pytest.mark.skipif(not RECORDS, reason="no record to mutate")
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_several_mutations_in_one_record(
    data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    tmp_path = tmp_path_factory.mktemp("mix")
    record = data.draw(st.sampled_from(RECORDS))
    chosen = record
    for _ in range(data.draw(st.integers(1, 4))):
        paths = [p for p in _paths(chosen) if p]
        if not paths:
            break
        path = data.draw(st.sampled_from(paths))
        if data.draw(st.booleans()):
            chosen = _set(chosen, path, None, delete=True)
        else:
            chosen = _set(chosen, path, data.draw(st.sampled_from(_mutations(_get(chosen, path)))))
    capture = tmp_path / "mixed.jsonl"
    capture.write_text(json.dumps(chosen) + "\n" + json.dumps(record) + "\n")
    _run_all(capture, tmp_path)
