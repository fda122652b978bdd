"""Regression tests for the adversarial findings (issue 12), one group per finding, each
failing on the code before its fix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import cpg, endpoint, flow_dict, jsonl
from cpg_core import FlowParseError, parse_record


def _with_l4(body: dict[str, Any]) -> dict[str, Any]:
    record = flow_dict()
    record["flow"]["l4"] = body
    return record


OUT_OF_RANGE = [
    _with_l4({"TCP": {"destination_port": 2**64}}),
    _with_l4({"TCP": {"destination_port": 1e308}}),
    _with_l4({"UDP": {"destination_port": "12345678901234567890123456"}}),
    _with_l4({"TCP": {"destination_port": 65536}}),
    _with_l4({"ICMPv4": {"type": 2**64}}),
    _with_l4({"ICMPv6": {"type": 256}}),
    {"lost_events": {"source": "HUBBLE_RING_BUFFER", "num_events_lost": 2**64}},
    {"lost_events": {"source": "HUBBLE_RING_BUFFER", "num_events_lost": -5}},
    {**flow_dict(), "flow": {**flow_dict()["flow"], "drop_reason_desc": None, "drop_reason": -1}},
    {**flow_dict(), "flow": {**flow_dict()["flow"], "verdict": 2**40}},
]


@pytest.mark.parametrize("record", OUT_OF_RANGE)
def test_10_out_of_range_numbers_make_the_line_malformed(record: dict[str, Any]) -> None:
    with pytest.raises(FlowParseError, match=r"between 0 and|not an enum number"):
        parse_record(json.loads(json.dumps(record)))


def test_10_a_bad_number_never_aborts_the_run(tmp_path: Path) -> None:
    capture = tmp_path / "bad.jsonl"
    capture.write_text(jsonl([flow_dict(), *OUT_OF_RANGE, flow_dict(tcp=443)]))
    out = tmp_path / "policies"
    ran = cpg(
        "replay",
        str(capture),
        "-o",
        str(out),
        "--evidence-dir",
        str(tmp_path / "e"),
        "--output",
        "json",
    )
    assert ran.returncode == 0, ran.stderr
    report = json.loads(ran.stdout)
    assert report["malformed"]["count"] == len(OUT_OF_RANGE)
    assert report["lost_events"] == 0
    assert (out / "shop" / "cart.yaml").exists()


def _replayed(tmp_path: Path) -> tuple[Path, Path, Path]:
    capture = tmp_path / "c.jsonl"
    capture.write_text(jsonl([flow_dict()]))
    out, evidence = tmp_path / "policies", tmp_path / "evidence"
    assert (
        cpg("replay", str(capture), "-o", str(out), "--evidence-dir", str(evidence)).returncode == 0
    )
    return capture, out, evidence


@pytest.mark.parametrize(
    ("field", "value"), [("sessions", 5), ("rules", {"a": 1}), ("flow_count", "lots")]
)
def test_12_evidence_with_wrong_types_is_an_error_naming_the_file(
    tmp_path: Path, field: str, value: object
) -> None:
    capture, out, evidence = _replayed(tmp_path)
    (path,) = evidence.glob("*/shop/cart.json")
    doc = json.loads(path.read_text())
    if field == "flow_count":
        doc["rules"][0][field] = value
    else:
        doc[field] = value
    path.write_text(json.dumps(doc))
    explained = cpg("explain", "shop/cart", "-o", str(out), "--evidence-dir", str(evidence))
    assert explained.returncode == 1 and str(path) in explained.stderr
    again = cpg("replay", str(capture), "-o", str(out), "--evidence-dir", str(evidence))
    assert again.returncode == 1 and str(path) in again.stderr


def test_12_durations_too_long_are_usage_errors(tmp_path: Path) -> None:
    _, out, evidence = _replayed(tmp_path)
    since = cpg(
        "explain",
        "shop/cart",
        "-o",
        str(out),
        "--evidence-dir",
        str(evidence),
        "--since",
        "99999999999999d",
    )
    assert since.returncode == 2 and "too long" in since.stderr
    timeout = cpg("generate", "--server", "127.0.0.1:9", "--timeout", "99999999999999999999d")
    assert timeout.returncode == 2 and "too long" in timeout.stderr


def test_12_closed_standard_input_is_an_error(tmp_path: Path) -> None:
    import subprocess

    from conftest import CPG

    ran = subprocess.run(
        ["bash", "-c", f"'{CPG}' replay - -o '{tmp_path / 'p'}' <&-"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 1, ran.stderr
    assert "standard input is closed" in ran.stderr and "Traceback" not in ran.stderr


def test_12_a_malformed_policy_is_named_not_a_crash(tmp_path: Path) -> None:
    capture, _, _ = _replayed(tmp_path)
    head = (
        "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\n"
        "metadata: {name: odd, namespace: shop}\n"
        "spec:\n  endpointSelector: {matchLabels: {app: cart}}\n  ingress:\n"
    )
    bad = tmp_path / "bad"
    bad.mkdir()
    # values: 5 is no selector the API server accepts: it selects nothing.
    (bad / "not-a-policy-odd.yaml").write_text(
        head + "  - fromEndpoints:\n    - matchExpressions:\n"
        "      - {key: app, operator: In, values: 5}\n"
    )
    verified = cpg("verify", str(capture), "--policies", str(bad))
    assert verified.returncode == 3 and "NOT admitted" in verified.stdout
    # ports: 7 cannot be read at all: the policy is named.
    (bad / "not-a-policy-odd.yaml").write_text(
        head + "  - fromEndpoints: [{matchLabels: {app: frontend}}]\n    toPorts: [{ports: 7}]\n"
    )
    verified = cpg("verify", str(capture), "--policies", str(bad))
    assert verified.returncode == 1, verified.stdout
    assert "policy shop/odd is not a valid CiliumNetworkPolicy" in verified.stderr


HOSTILE = "web\x1b[2J\x1b]0;pwned\x07\u200b\u200e\u200f\u061c\ufeff\U000e0041\U000e007f\ue000x"


def test_17_19_no_escape_or_invisible_character_reaches_a_terminal(tmp_path: Path) -> None:
    flows = [
        flow_dict(
            src=endpoint("shop", "web", pod_name=f"pod-{HOSTILE}"),
            dst=endpoint("shop", "cart"),
            node_name=f"node-{HOSTILE}",
        ),
        flow_dict(
            reason="POLICY_DENY", tcp=5432, src=endpoint("shop", "web", pod_name=f"x-{HOSTILE}")
        ),
    ]
    capture = tmp_path / "hostile.jsonl"
    capture.write_text(jsonl(flows))
    out, evidence = tmp_path / "policies", tmp_path / "evidence"
    runs = [
        cpg("replay", str(capture), "-o", str(out), "--evidence-dir", str(evidence)),
        cpg("explain", "shop/cart", "-o", str(out), "--evidence-dir", str(evidence)),
        cpg("verify", str(capture), "--policies", str(out)),
    ]
    for ran in runs:
        assert ran.returncode == 0, ran.stderr
        for text in (ran.stdout, ran.stderr):
            assert "\x1b" not in text and "[2J" not in text and "pwned" not in text
            assert not any(ord(c) > 0x2000 and c not in "→…" for c in text), repr(text)
    assert "pod-webx" in runs[1].stdout, "the readable rest of the name stays"


def test_17_the_mcp_cleaner_drops_format_private_and_tag_characters() -> None:
    from cpg_mcp.sanitize import clean

    assert clean({"k\u200b": [HOSTILE]}) == {"k": ["webx"]}
    assert clean("caf\u00e9 \u00a0ok\n", keep_newlines=True) == "caf\u00e9 \u00a0ok\n"


# --- 2: one string path for YAML --------------------------------------------------------------

_TEXT = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=30)


def _policy_of(records: list[dict[str, Any]], **options: Any) -> str:
    from cpg_core import AggregateOptions, Aggregator, parse_flow, render_or_merge

    agg = Aggregator(AggregateOptions(**options))
    for record in records:
        agg.add(parse_flow(record))
    plans = [p for p in agg.plans() if p.workload == "cart"]
    assert len(plans) == 1
    plan = plans[0]
    text = render_or_merge(
        None,
        name=plan.name,
        namespace=plan.namespace,
        selector=plan.target.selector,
        rules=plan.rules,
    )
    again = render_or_merge(
        text,
        name=plan.name,
        namespace=plan.namespace,
        selector=plan.target.selector,
        rules=plan.rules,
    )
    assert again == text, "a rerun changes nothing"
    return text


def _both_loaders(text: str) -> dict[str, Any]:
    pure = yaml.load(text, Loader=yaml.SafeLoader)
    assert yaml.load(text, Loader=yaml.CSafeLoader) == pure, "libyaml reads the same"
    assert isinstance(pure, dict)
    return pure


@settings(max_examples=300, deadline=None)
@given(value=_TEXT)
def test_2_any_label_value_round_trips(value: str) -> None:
    peer = {"namespace": "shop", "labels": [f"k8s:app={value}"]}
    doc = _both_loaders(_policy_of([flow_dict(src=peer)]))
    (rule,) = doc["spec"]["ingress"]
    assert rule["fromEndpoints"][0]["matchLabels"]["app"] == value


@settings(max_examples=300, deadline=None)
@given(path=_TEXT, name=_TEXT)
def test_2_any_http_path_and_dns_name_round_trip(path: str, name: str) -> None:
    from cpg_core.l7 import dns_name, path_regex

    get = flow_dict(l7={"type": "REQUEST", "http": {"method": "GET", "url": "/" + path}})
    query = flow_dict(
        src=endpoint("shop", "cart"),
        dst=endpoint("kube-system", "dns"),
        direction="EGRESS",
        udp=53,
        l7={"type": "REQUEST", "dns": {"query": name}},
    )
    doc = _both_loaders(_policy_of([get, query], l7=True))
    http = doc["spec"]["ingress"][0]["toPorts"][0]["rules"]["http"][0]
    assert http["path"] == path_regex("/" + path)
    if dns_name(name):
        dns = doc["spec"]["egress"][0]["toPorts"][0]["rules"]["dns"]
        assert {"matchName": dns_name(name)} in dns


def test_2_emoji_paths_and_newline_labels_are_written_once(tmp_path: Path) -> None:
    records = [
        flow_dict(l7={"type": "REQUEST", "http": {"method": "GET", "url": "/emoji/\U0001f680"}}),
        flow_dict(src={"namespace": "shop", "labels": ["k8s:app=frontend\n"]}, tcp=9090),
    ]
    capture = tmp_path / "c.jsonl"
    capture.write_text(jsonl(records))
    out = tmp_path_factory_dir(tmp_path)
    first = cpg("replay", str(capture), "-o", str(out), "--l7", "--no-evidence")
    assert first.returncode == 0, first.stderr
    text = (out / "shop" / "cart.yaml").read_text()
    assert "\\ud83d" not in text and '"^/emoji/\\U0001f680$"' in text
    assert '"frontend\\n"' in text
    doc = _both_loaders(text)
    assert doc["spec"]["ingress"]
    second = cpg("replay", str(capture), "-o", str(out), "--l7", "--no-evidence")
    assert second.returncode == 0 and (out / "shop" / "cart.yaml").read_text() == text
    assert "1 unchanged" in second.stdout
    verified = cpg("verify", str(capture), "--policies", str(out))
    assert verified.returncode == 0, verified.stdout


def tmp_path_factory_dir(tmp_path: Path) -> Path:
    """Outside tmp_path: a label value ending in a newline is no valid Kubernetes label, so
    the CRD check every test's tmp_path gets would refuse the file (cpg writes it faithfully)."""
    import tempfile

    return Path(tempfile.mkdtemp(prefix="cpg-newline-", dir=tmp_path.parent))


def test_2_bootstrap_refuses_a_namespace_with_a_newline() -> None:
    ran = cpg("bootstrap", "-n", "shop\n")
    assert ran.returncode == 2 and "apiVersion" not in ran.stdout


# --- 9: YAML aliases ---------------------------------------------------------------------------


def _laughs() -> str:
    """Eight nested aliases (the classic expansion bomb) in an otherwise valid policy."""
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 9):
        refs = ",".join([f"*a{i - 1}"] * 9)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return (
        "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\n"
        "metadata:\n  name: cpg-cart\n  namespace: shop\n"
        + "\n".join(lines).replace("a0:", "x-bomb:\n  a0:").replace("\na", "\n  a")
        + "\nspec:\n  endpointSelector:\n    matchLabels:\n      app: cart\n"
        + "  ingress:\n  - fromEntities:\n    - host\n"
    )


def test_9_aliases_in_an_existing_policy_are_refused(tmp_path: Path) -> None:
    capture = tmp_path / "c.jsonl"
    capture.write_text(jsonl([flow_dict()]))
    out = tmp_path / "policies"
    (out / "shop").mkdir(parents=True)
    bomb = out / "shop" / "cart.yaml"
    bomb.write_text(_laughs())
    assert len(bomb.read_bytes()) < 1000
    ran = cpg("replay", str(capture), "-o", str(out), "--no-evidence")
    assert ran.returncode == 1
    assert f"{bomb}: uses YAML anchors or aliases" in ran.stderr
    assert bomb.read_text() == _laughs(), "the file is left alone"
    verified = cpg("verify", str(capture), "--policies", str(out))
    assert verified.returncode == 1 and "anchors or aliases" in verified.stderr


# --- 3, 4, 7: bounded, exact input reading ---------------------------------------------------


def _capture_lines(count: int) -> bytes:
    return jsonl(
        [
            flow_dict(
                src=endpoint("shop", f"web-{i % 7}"), tcp=8000 + i % 50, src_ip=f"10.1.0.{i % 250}"
            )
            for i in range(count)
        ]
    ).encode()


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_3_a_truncated_gzip_keeps_every_complete_line(tmp_path: Path, jobs: str) -> None:
    import gzip
    import zlib

    data = _capture_lines(3000)
    packed = gzip.compress(data)
    cut = packed[: len(packed) * 9 // 10]
    readable = zlib.decompressobj(wbits=31).decompress(cut)
    complete = readable.count(b"\n")
    assert 0 < complete < 3000
    capture = tmp_path / "cut.jsonl.gz"
    capture.write_bytes(cut)
    ran = cpg(
        "replay",
        str(capture),
        "-o",
        str(tmp_path / "p"),
        "--no-evidence",
        "-j",
        jobs,
        "--output",
        "json",
    )
    assert ran.returncode == 1 and "input ended early" in ran.stderr
    report = json.loads(ran.stdout)
    assert report["flows"]["total"] == complete
    assert report["lines_read"] == complete


def test_4_the_line_length_limit_does_not_depend_on_jobs(tmp_path: Path) -> None:
    from cpg_core.lines import MAX_LINE_BYTES

    huge = flow_dict(tcp=9999)
    huge["flow"]["padding"] = "x" * (MAX_LINE_BYTES + 1000)
    capture = tmp_path / "huge.jsonl"
    with capture.open("wb") as out:
        out.write(_capture_lines(200))
        out.write(jsonl([huge]).encode())
        out.write(_capture_lines(40_000))
    reports = []
    for jobs in ("1", "2"):
        ran = cpg(
            "replay",
            str(capture),
            "-o",
            str(tmp_path / f"p{jobs}"),
            "--no-evidence",
            "-j",
            jobs,
            "--output",
            "json",
        )
        assert ran.returncode == 0, ran.stderr
        report = json.loads(ran.stdout)
        reports.append((report["malformed"], report["flows"], report["lines_read"]))
    assert reports[0] == reports[1]
    assert reports[0][0]["count"] == 1 and reports[0][0]["examples"][0]["line"] == 201
    assert "9999" not in (tmp_path / "p2" / "shop" / "cart.yaml").read_text()


def test_7_a_fifo_is_read_once(tmp_path: Path) -> None:
    import os
    import threading

    from conftest import cpg_process

    fifo = tmp_path / "flows.fifo"
    os.mkfifo(fifo)
    data = _capture_lines(100)  # fits the pipe buffer: the writer is gone before cpg reads

    def feed() -> None:
        with fifo.open("wb") as out:
            out.write(data)

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    ran = cpg_process("replay", str(fifo), "-o", str(tmp_path / "p"), "--no-evidence", "-j", "2")
    writer.join(10)
    assert ran.returncode == 0, ran.stderr
    assert "Read 100 lines" in ran.stdout
