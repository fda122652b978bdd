"""The quick way through a replay (and a live capture): the commonest flows counted by their
allow-entry key or decision, a Flow parsed only for the samples kept. It must never disagree
with the full path: not on a real line, not on a mangled one, not in any order."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from google.protobuf import json_format

import cpg_core._synthesis.lines
from conftest import CORPUS, EXAMPLE, endpoint, flow_dict
from cpg_core import AggregateOptions, Aggregator, Decision, FlowParser
from cpg_core._base.errors import FlowParseError
from cpg_core._base.flow import Flow
from cpg_core._flows.attribution import time_key
from cpg_core._flows.decide import DecideOptions, decide
from cpg_core._flows.quickline import QuickReader
from cpg_core._synthesis.lines import ReadStats, aggregate_lines
from cpg_io._proto.observer import observer_pb2
from cpg_io.hubble_convert import ProtoConverter


def _agrees(line: bytes, found: Any, reader: QuickReader) -> None:
    """A line the quick reader took parses, and means exactly what it said: the same Flow,
    or a key or decision that Flow has."""
    flow = FlowParser().parse(orjson.loads(line))
    assert reader.flow(line) in (flow, None)
    if isinstance(found, Flow):
        assert found == flow
        return
    what, time = found
    assert flow.time == time
    assert flow.l7 is None and not flow.destination_names
    if isinstance(what, tuple):
        key = (flow.direction, flow.source, flow.destination, flow.protocol, flow.port)
        assert reader.entry_key(what) == key
        assert decide(flow) is Decision.CANDIDATE
        assert flow.drop_reason == 133 and flow.is_reply is not True
    else:
        assert decide(flow) is what


def _real_lines() -> list[bytes]:
    files = [EXAMPLE, *sorted(CORPUS.glob("*.json*"))] if CORPUS.is_dir() else [EXAMPLE]
    return [line for path in files for line in path.read_bytes().splitlines()]


def test_every_real_line_the_quick_reader_takes_means_the_same() -> None:
    reader = QuickReader(FlowParser())
    taken = {"entry": 0, "context": 0, "flow": 0}
    for line in _real_lines():
        found = reader.read(line)
        if found is not None:
            _agrees(line, found, reader)
            kind = "flow" if isinstance(found, Flow) else "entry"
            taken[kind if kind == "flow" or isinstance(found[0], tuple) else "context"] += 1
    assert taken["entry"] >= 20  # the example capture's policy drops
    assert taken["flow"] >= 1  # its other drops
    if CORPUS.is_dir():
        assert taken["context"] >= 1000  # the corpus is mostly forwarded flows


def _seeds() -> list[dict[str, Any]]:
    shop = endpoint("shop", "frontend", ID=12, identity=3001, pod_name="frontend-1")
    cart = endpoint("shop", "cart", identity=3002, pod_name="cart-1", cluster_name="west")
    return [
        flow_dict(shop, cart, uuid="u-1", node_name="n1"),
        flow_dict(shop, cart, udp=53, direction="EGRESS", time="2026-11-02T10:00:00.123456Z"),
        flow_dict(shop, cart, reply=True, Summary="TCP Flags: ACK"),
        flow_dict(shop, cart, verdict="FORWARDED", reason=None, Type="L3_L4"),
        flow_dict(
            endpoint("shop", "frontend", workloads=[{"name": "frontend", "kind": "Deployment"}]),
            cart,
            event_type={"type": 5, "sub_type": 0},
            interface={"index": 3, "name": "lxc1"},
            socket_cookie="18446744073709551615",
        ),
        {**flow_dict(shop, cart), "node_name": "n2", "time": "2026-11-02T10:00:01Z"},
        {"flow": {**flow_dict(shop, cart, reply=None)["flow"], "reply": True}},  # older Hubble
        # Flows of other kinds, which the reader turns into Flows itself.
        flow_dict(shop, cart, reason="CT_MAP_INSERTION_FAILED", node_name="n3"),
        flow_dict(shop, cart, reason=None, udp=53, drop_reason=133, uuid="u-2"),
        flow_dict(shop, cart, reason=None, tcp=443, drop_reason_desc=181, reply=None),
        flow_dict(shop, cart, icmp4=8, reason="POLICY_DENIED", time=None),
        {  # the time of the response, not of the flow
            "flow": {
                k: v for k, v in flow_dict(reason="AUTH_REQUIRED")["flow"].items() if k != "time"
            },
            "time": "2026-11-02T10:00:02Z",
        },
        flow_dict(cart, None, verdict="AUDIT", tcp=None, IP={}, Summary="x"),
        flow_dict(
            shop,
            cart,
            direction="EGRESS",
            reason="STALE_OR_UNROUTABLE_IP",
            l4={"TCP": {"destination_port": 80, "flags": {"ACK": True, "PSH": True}}},
        ),
    ]


# Values that sit at the edge of what either decoder accepts, written raw into the line.
_ODD_VALUES: list[bytes] = [
    b"null",
    b"true",
    b"0",
    b"-1",
    b"65535",
    b"65536",
    b"256",
    b"2147483648",
    b"9223372036854775808",
    b"1" + b"0" * 400,
    b"1e999",
    b"1.5",
    b'""',
    b'"x"',
    b'"INGRESS"',
    b'"DROPPED"',
    b'"POLICY_DENIED"',
    b"[]",
    b'["a"]',
    b"[1]",
    b"{}",
    b'{"x":1}',
    b'"\\ud800"',
    b'"\xff"',
    b'"\xc3\xa9"',
    b"[" * 600 + b"]" * 600,
]
_ODD_KEYS = ["l7", "dropReasonDesc", "trafficDirection", "isReply", "extensions", "podName", "zz"]


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [at]
    if isinstance(value, dict):
        for key, inner in value.items():
            found += _paths(inner, (*at, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found += _paths(inner, (*at, index))
    return found


def _mutate(record: dict[str, Any], rng: random.Random) -> bytes:
    """The record with one odd change, as a JSON line (possibly no longer valid JSON)."""
    record = json.loads(json.dumps(record))
    odd = rng.choice(_ODD_VALUES)
    mark = '"@@odd@@"'
    path = rng.choice(_paths(record)[1:])
    holder = record
    for step in path[:-1]:
        holder = holder[step]
    roll = rng.random()
    if roll < 0.6 or not isinstance(holder, dict):
        holder[path[-1]] = "@@odd@@"
    elif roll < 0.8:
        holder[rng.choice(_ODD_KEYS)] = "@@odd@@"
    else:  # the same key twice: the last one counts in both decoders
        text = json.dumps(record)
        key = json.dumps(path[-1])
        return (
            text.replace(f"{key}: ", f"{key}: {mark}, {key}: ", 1)
            .replace(mark, odd.decode("latin-1"))
            .encode("latin-1")
        )
    line = json.dumps(record).encode().replace(mark.encode(), odd)
    assert odd in line
    if rng.random() < 0.1:  # and sometimes a byte cut out or slipped in
        at = rng.randrange(len(line))
        line = line[:at] + line[at + 1 :] if rng.random() < 0.5 else line[:at] + b"}" + line[at:]
    return line


def test_mutated_lines_never_split_the_two_paths() -> None:
    rng = random.Random(17)
    reader = QuickReader(FlowParser())
    taken = refused = flows = 0
    for _ in range(6000):
        line = _mutate(rng.choice(_seeds()), rng)
        found = reader.read(line)
        if found is None:
            refused += 1
            continue
        taken += 1
        flows += isinstance(found, Flow)
        try:
            _agrees(line, found, reader)
        except (orjson.JSONDecodeError, FlowParseError) as exc:  # pragma: no cover - the bug
            pytest.fail(f"taken quickly but refused by the parser ({exc}): {line!r}")
    assert taken > 500 and refused > 500  # both ways were exercised
    assert flows > 200  # and the Flows the reader builds itself


def _capture(rng: random.Random, count: int) -> list[bytes]:
    """A mixed capture: policy drops over a few pairs and ports (some repeated, some
    reordered), replies, forwarded flows, infra drops, L7 and malformed lines."""
    pods = [
        endpoint(ns, app, identity=100 + i, pod_name=f"{app}-{i}")
        for i, (ns, app) in enumerate(
            [("shop", "frontend"), ("shop", "cart"), ("shop", "db"), ("pay", "api")]
        )
    ]
    lines = []
    time = ""
    for i in range(count):
        second = i // 7 if rng.random() > 0.1 else rng.randrange(count // 7 + 1)
        if not time or rng.random() > 0.2:  # else the same time as the flow before
            time = f"2026-11-02T10:{second // 60 % 60:02d}:{second % 60:02d}.{i % 1000:03d}Z"
        src, dst = rng.sample(pods, 2)
        roll = rng.random()
        kind: dict[str, Any] = {}
        if roll < 0.1:
            kind = {"verdict": "FORWARDED", "reason": None}
        elif roll < 0.15:
            kind = {"reply": True}
        elif roll < 0.2:
            kind = {"reason": "CT_MAP_INSERTION_FAILED"}
        elif roll < 0.22:
            kind = {"l7": {"type": "REQUEST", "http": {"method": "GET", "url": "/a/1"}}}
        elif roll < 0.24:
            kind = {"verdict": "AUDIT"}
        record = flow_dict(
            src,
            dst,
            time=time,
            tcp=rng.choice((80, 443, 8080)),
            direction=rng.choice(("INGRESS", "EGRESS")),
            uuid=f"u-{i}",
            node_name=f"node-{i % 3}",
            **kind,
        )
        lines.append(json.dumps(record).encode() if rng.random() > 0.01 else b'{"flow": [}')
    return lines


def _aggregate(
    lines: list[bytes], options: AggregateOptions, quick: bool, reader_per_batch: bool = False
) -> Any:
    """With ``quick``, one reader for every batch as the engines do (counts by quick key
    pile up until the end), or a new one per batch (each folds what the last one counted)."""
    parser = FlowParser()
    aggregator = Aggregator(options)
    stats = ReadStats()
    reader = QuickReader(parser) if quick else None
    for at in range(0, len(lines), 500):  # in batches, as the workers read them
        if quick and reader_per_batch:
            reader = QuickReader(parser)
        aggregate_lines(lines[at : at + 500], at + 1, stats, parser, aggregator, reader)
    return aggregator.state(), stats, aggregator.plans()


@pytest.mark.parametrize(
    "options",
    [
        AggregateOptions(),
        AggregateOptions(max_samples=2),
        AggregateOptions(max_samples=0),
        AggregateOptions(l7=True),
        AggregateOptions(since="2026-11-02T10:02:00.000000000Z"),
        AggregateOptions(until="2026-11-02T10:06:00.000000000Z"),
        AggregateOptions(namespaces=frozenset({"pay"})),
        AggregateOptions(decide=DecideOptions(ignore_protocols=frozenset({"tcp"}))),
        AggregateOptions(decide=DecideOptions(ignore_reasons=frozenset({133}))),
        AggregateOptions(decide=DecideOptions(include_audit=True)),
        AggregateOptions(decide=DecideOptions(learn=True)),
        AggregateOptions(decide=DecideOptions(learn=True, learn_allowed=True)),
        AggregateOptions(decide=DecideOptions(allow_localhost=False, learn=True)),
    ],
    ids=[
        "default",
        "two-samples",
        "no-samples",
        "l7",
        "since",
        "until",
        "one-namespace",
        "ignore-tcp",
        "ignore-policy-denied",
        "include-audit",
        "learn",
        "learn-allowed",
        "learn-no-localhost",
    ],
)
def test_the_quick_way_aggregates_exactly_as_the_full_path(options: AggregateOptions) -> None:
    rng = random.Random(5)
    lines = _capture(rng, 4000)
    for order in ("as captured", "shuffled"):
        if order == "shuffled":
            rng.shuffle(lines)
        full = _aggregate(lines, options, quick=False)
        for per_batch in (False, True):
            quick = _aggregate(lines, options, quick=True, reader_per_batch=per_batch)
            assert quick[0] == full[0], order
            assert quick[1] == full[1], order
            assert quick[2] == full[2], order
            assert [p.attribution for p in quick[2]] == [p.attribution for p in full[2]], order


def test_bounded_caches_that_clear_midway_change_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reader forgets endpoints and the aggregator folds its counts when their caches
    fill up: numbers are never given twice, so a count never lands on another entry."""
    import cpg_core._flows.numbers
    import cpg_core._synthesis._entries

    lines = _capture(random.Random(3), 3000)
    full = _aggregate(lines, AggregateOptions(), quick=False)
    monkeypatch.setattr(cpg_core._flows.numbers, "ENDPOINT_CACHE_LIMIT", 3)
    monkeypatch.setattr(cpg_core._synthesis._entries, "_ENTRY_CACHE_LIMIT", 5)
    quick = _aggregate(lines, AggregateOptions(), quick=True)
    assert quick[0] == full[0]
    assert [p.attribution for p in quick[2]] == [p.attribution for p in full[2]]


def test_folding_in_slices_gives_what_one_fold_gives() -> None:
    """A live flush folds the counts a slice at a time (fold_some), the stream adding more in
    between: the aggregate is the same as one fold at the end gives."""
    lines = _capture(random.Random(4), 3000)
    whole = _aggregate(lines, AggregateOptions(), quick=True)
    parser = FlowParser()
    aggregator = Aggregator(AggregateOptions())
    stats = ReadStats()
    reader = QuickReader(parser)
    slices = 0
    for at in range(0, len(lines), 500):
        aggregate_lines(lines[at : at + 500], at + 1, stats, parser, aggregator, reader)
        while not aggregator.fold_some(7):
            slices += 1
    assert slices > 10  # it did stop at the limit, and went on where it stopped
    assert aggregator.state() == whole[0]
    assert aggregator.plans() == whole[2]


def test_a_hand_over_is_the_state_without_the_copies() -> None:
    """What a done worker hands back counts what state() counts; its samples may stay lines
    (a forked worker's pipe) or go parsed (over a network, a third of the bytes), and
    absorbing either gives the same aggregate."""
    lines = _capture(random.Random(11), 3000)

    def fed() -> Aggregator:
        parser = FlowParser()
        aggregator, reader = Aggregator(), QuickReader(parser)
        for at in range(0, len(lines), 500):
            aggregate_lines(lines[at : at + 500], at + 1, ReadStats(), parser, aggregator, reader)
        return aggregator

    expected = fed().state()
    kept = fed().hand_over()
    parsed = fed().hand_over(parse_samples=True)
    samples = [
        sample
        for atoms in parsed.atoms.values()
        for stats in atoms.values()
        for sample in stats.samples.values()
    ]
    assert samples and all(isinstance(sample, Flow) for sample in samples)
    assert any(
        isinstance(sample, tuple)
        for atoms in kept.atoms.values()
        for stats in atoms.values()
        for sample in stats.samples.values()
    )
    for handed in (kept, parsed):
        merged = Aggregator()
        merged.absorb(handed, own=True)
        assert merged.state() == expected


_READS: dict[str, Any] = {
    "window": lambda a: a.window(),
    "rule_flows": lambda a: a.rule_flows,
    "atoms": lambda a: a.atoms,
    "attribution": lambda a: _settled(a.attribution()),
    "busy_targets": lambda a: a.busy_targets(),
    "health": lambda a: a.health(started="s", ended="e"),
    "plans": lambda a: [(p, _settled({0: p.attribution})) for p in a.plans()],
    "drain": lambda a: _settled(a.drain(list(a.busy_targets()))),
}


def _settled(entries: dict[Any, dict[Any, Any]]) -> dict[Any, dict[Any, Any]]:
    """Entries with every sample parsed (a sample kept unparsed equals its flow)."""
    return {t: {k: stats.copy() for k, stats in atoms.items()} for t, atoms in entries.items()}


@pytest.mark.parametrize("drained", [False, True], ids=["whole", "drained-halfway"])
@pytest.mark.parametrize("read", sorted(_READS))
def test_every_read_sees_the_lines_counted_by_quick_key(read: str, drained: bool) -> None:
    """Whatever is read first after the lines (not only state()), it already holds the
    flows counted by quick key and not yet folded into their entries; also after a live
    capture's drain emptied the entries halfway."""
    # Policy drops only: the oldest and newest flows are ones counted by quick key.
    lines = [
        line
        for line in _capture(random.Random(9), 3000)
        if b"POLICY_DENIED" in line and b'"is_reply": true' not in line and b'"l7"' not in line
    ]
    seen = []
    for quick in (False, True):
        parser = FlowParser()
        aggregator = Aggregator()
        reader = QuickReader(parser) if quick else None
        for at in range(0, len(lines), 500):
            if drained and at == 1000:
                aggregator.drain(aggregator.busy_targets())
            aggregate_lines(lines[at : at + 500], at + 1, ReadStats(), parser, aggregator, reader)
        seen.append(_READS[read](aggregator))
    assert seen[0] == seen[1]
    if read == "rule_flows":
        assert seen[0] > 1000


def test_a_flow_is_parsed_only_for_the_samples_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[object] = []
    real = cpg_core._synthesis.lines.flow_of_line

    def counting(line: bytes | str) -> Any:
        parsed.append(line)
        return real(line)

    monkeypatch.setattr(cpg_core._synthesis.lines, "flow_of_line", counting)
    lines = [
        json.dumps(
            flow_dict(time=f"2026-11-02T10:{i // 60:02d}:{i % 60:02d}.000000001Z", uuid=f"u{i}")
        ).encode()
        for i in range(3000)
    ]
    state, _, _ = _aggregate(lines, AggregateOptions(), quick=True)
    ((stats,),) = [list(atoms.values()) for atoms in state.atoms.values()]
    assert stats.count == 3000
    assert len(parsed) == 1 and parsed[0] == lines[-1]  # the one sample kept, parsed once
    assert next(iter(stats.samples.values())).uuid == "u2999"


def _response(line: bytes) -> Any:
    return json_format.Parse(line, observer_pb2.GetFlowsResponse(), ignore_unknown_fields=True)


def _flow_responses(lines: list[bytes]) -> Iterator[Any]:
    """The lines that are flows, as the protobuf messages a relay would send."""
    for line in lines:
        try:
            response = _response(line)
        except (json_format.ParseError, ValueError):
            continue
        if response.WhichOneof("response_types") == "flow":
            yield response


def test_the_live_quick_way_means_what_the_conversion_says() -> None:
    converter = ProtoConverter()
    rng = random.Random(3)
    lines = _capture(rng, 1500) + [line for line in _real_lines() if line.startswith(b'{"flow"')]
    taken = 0
    for response in _flow_responses(lines):
        found = converter.quick(response.flow, response)
        flow = converter.flow(response.flow, response)
        if found is None:
            continue
        taken += 1
        what, time = found
        assert time == time_key(flow.time)  # the aggregator's key, made without the text
        if isinstance(what, tuple):
            entry = (flow.direction, flow.source, flow.destination, flow.protocol, flow.port)
            assert converter.entry_key(what) == entry
            assert decide(flow) is Decision.CANDIDATE
        else:
            assert decide(flow) is what
        assert converter.flow_of(response) == flow
    assert taken > 1000


def _taken_live(lines: list[bytes], options: AggregateOptions, out: Path) -> Any:
    """The flows of ``lines`` as a live capture takes them (its own ``_take_flow``), and
    the share of them it converted to a Flow."""
    from cpg_io.runs._live import LiveCapture, LiveSettings

    capture = LiveCapture(LiveSettings(server="127.0.0.1:9", output_dir=out, options=options))
    flows = converted = 0
    real = capture.totals.add

    def add(flow: Flow) -> Decision:
        nonlocal converted
        converted += 1
        return real(flow)

    capture.totals.add = add  # type: ignore[method-assign]
    for response in _flow_responses(lines):
        flows += 1
        capture._take_flow(response.flow, response)
    return capture.totals.state(), capture.totals.plans(), converted / flows


def _converted(lines: list[bytes], options: AggregateOptions) -> Any:
    """The same flows, each converted to a Flow and added."""
    converter = ProtoConverter()
    aggregator = Aggregator(options)
    for response in _flow_responses(lines):
        aggregator.add(converter.flow(response.flow, response))
    return aggregator.state(), aggregator.plans()


@pytest.mark.parametrize(
    "options",
    [AggregateOptions(), AggregateOptions(max_samples=2), AggregateOptions(l7=True)],
    ids=["default", "two-samples", "l7"],
)
def test_the_live_quick_way_aggregates_exactly_as_converting_every_flow(
    options: AggregateOptions, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Counted by the converter's numbers, also when its bounded caches and the
    aggregator's clear midway (numbers are never given twice)."""
    import cpg_core._flows.numbers
    import cpg_core._synthesis._entries
    import cpg_io.hubble_convert

    lines = _capture(random.Random(8), 3000)
    full = _converted(lines, options)
    *taken, converted = _taken_live(lines, options, tmp_path / "a")
    assert tuple(taken) == full
    assert converted < 0.25  # most flows were counted by their key, not converted
    monkeypatch.setattr(cpg_core._flows.numbers, "ENDPOINT_CACHE_LIMIT", 3)
    monkeypatch.setattr(cpg_io.hubble_convert, "_ENDPOINT_CACHE_LIMIT", 3)
    monkeypatch.setattr(cpg_core._synthesis._entries, "_ENTRY_CACHE_LIMIT", 5)
    *taken, _converted_share = _taken_live(lines, options, tmp_path / "b")
    assert tuple(taken) == full
    assert [p.attribution for p in taken[1]] == [p.attribution for p in full[1]]


def test_the_reader_gives_up_on_a_capture_of_another_shape() -> None:
    """camelCase lines never take the quick way; after a batch's first lines the reader is
    not even asked (and the result is the full path's)."""
    calls = 0
    parser = FlowParser()

    class Counting(QuickReader):
        __slots__ = ()

        def read(self, line: bytes | str) -> Any:
            nonlocal calls
            calls += 1
            return super().read(line)

    lines = [
        json.dumps(flow_dict(time=f"2026-11-02T10:00:{i % 60:02d}Z"))
        .replace("traffic_direction", "trafficDirection")
        .replace("drop_reason_desc", "dropReasonDesc")
        .encode()
        for i in range(2000)
    ]
    aggregator = Aggregator()
    aggregate_lines(lines, 1, ReadStats(), parser, aggregator, Counting(parser))
    assert calls < 300
    assert aggregator.candidates == 2000


def test_the_example_capture_replays_the_same_either_way(tmp_path: Path) -> None:
    lines = EXAMPLE.read_bytes().splitlines()
    assert _aggregate(lines, AggregateOptions(), True) == _aggregate(
        lines, AggregateOptions(), False
    )


def test_the_json_and_protobuf_quick_ways_share_one_rule() -> None:
    """QuickReader applies quick_decision's rule on verdict names (inline, for speed); the
    names it treats as context are exactly those the rule makes NOT_A_DROP, and the rule
    agrees with decide()."""
    from cpg_core._base.flow import Flow, Verdict
    from cpg_core._flows.quickline import _CONTEXT_VERDICTS, quick_decision

    context = {v.name for v in Verdict if quick_decision(int(v), 133, False) is Decision.NOT_A_DROP}
    assert context == _CONTEXT_VERDICTS
    for verdict in Verdict:
        for reason in (0, 133, 181):
            for reply in (False, True):
                said = quick_decision(int(verdict), reason, reply)
                flow = Flow(verdict=int(verdict), drop_reason=reason, is_reply=reply, port=80)
                if said is not None:
                    assert decide(flow) is said, (verdict, reason, reply)
