"""What a careless user, a hostile capture or a crash does to a run: out-of-range numbers and
wrong types, escape characters, odd label values and paths, YAML aliases, truncated and
endless inputs, unusable folders, concurrent runs, Ctrl+C and kill -9. Each test failed on
the code before its fix."""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings, strategies as st

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
def test_out_of_range_numbers_make_the_line_malformed(record: dict[str, Any]) -> None:
    with pytest.raises(FlowParseError, match=r"between 0 and|not an enum number"):
        parse_record(json.loads(json.dumps(record)))


def test_a_bad_number_never_aborts_the_run(tmp_path: Path) -> None:
    capture = tmp_path / "bad.jsonl"
    capture.write_text(jsonl([flow_dict(), *OUT_OF_RANGE, flow_dict(tcp=443)]))
    out = tmp_path / "policies"
    ran = cpg(
        "replay",
        str(capture),
        "-d",
        str(out),
        "--evidence-dir",
        str(tmp_path / "e"),
        "--output",
        "json",
        "--max-malformed",
        "100",  # most lines are bad on purpose: the run must still go on
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
        cpg("replay", str(capture), "-d", str(out), "--evidence-dir", str(evidence)).returncode == 0
    )
    return capture, out, evidence


@pytest.mark.parametrize(
    ("field", "value"), [("sessions", 5), ("rules", {"a": 1}), ("flow_count", "lots")]
)
def test_evidence_with_wrong_types_is_an_error_naming_the_file(
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
    explained = cpg("explain", "shop/cart", "-d", str(out), "--evidence-dir", str(evidence))
    assert explained.returncode == 1 and str(path) in explained.stderr
    again = cpg("replay", str(capture), "-d", str(out), "--evidence-dir", str(evidence))
    assert again.returncode == 1 and str(path) in again.stderr


def test_durations_too_long_are_usage_errors(tmp_path: Path) -> None:
    _, out, evidence = _replayed(tmp_path)
    since = cpg(
        "explain",
        "shop/cart",
        "-d",
        str(out),
        "--evidence-dir",
        str(evidence),
        "--since",
        "99999999999999d",
    )
    assert since.returncode == 2 and "too long" in since.stderr
    timeout = cpg("generate", "--server", "127.0.0.1:9", "--timeout", "99999999999999999999d")
    assert timeout.returncode == 2 and "too long" in timeout.stderr


def test_closed_standard_input_is_an_error(tmp_path: Path) -> None:
    import subprocess

    from conftest import CPG

    ran = subprocess.run(
        ["bash", "-c", f"'{CPG}' replay - -d '{tmp_path / 'p'}' <&-"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 1, ran.stderr
    assert "standard input is closed" in ran.stderr and "Traceback" not in ran.stderr


def test_a_malformed_policy_is_named_not_a_crash(tmp_path: Path) -> None:
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
    assert "not-a-policy-odd.yaml: not a usable Cilium policy: " in verified.stderr
    assert "spec.ingress[0].toPorts[0].ports: expected a list" in verified.stderr


HOSTILE = "web\x1b[2J\x1b]0;pwned\x07\u200b\u200e\u200f\u061c\ufeff\U000e0041\U000e007f\ue000x"


def test_no_escape_or_invisible_character_reaches_a_terminal(tmp_path: Path) -> None:
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
        cpg("replay", str(capture), "-d", str(out), "--evidence-dir", str(evidence)),
        cpg("explain", "shop/cart", "-d", str(out), "--evidence-dir", str(evidence)),
        cpg("verify", str(capture), "--policies", str(out)),
    ]
    for ran in runs:
        assert ran.returncode == 0, ran.stderr
        for text in (ran.stdout, ran.stderr):
            assert "\x1b" not in text and "[2J" not in text and "pwned" not in text
            assert not any(ord(c) > 0x2000 and c not in "→…" for c in text), repr(text)
    assert "pod-webx" in runs[1].stdout, "the readable rest of the name stays"


def test_the_mcp_cleaner_drops_format_private_and_tag_characters() -> None:
    from cpg_core.text import clean

    assert clean({"k\u200b": [HOSTILE]}) == {"k": ["webx"]}
    assert clean("caf\u00e9 \u00a0ok\n", keep_newlines=True) == "caf\u00e9 \u00a0ok\n"


# --- one string path for YAML --------------------------------------------------------------

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


_LABEL_VALUE = st.from_regex(r"\A(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?\Z")


@settings(max_examples=300, deadline=None)
@given(value=_TEXT | _LABEL_VALUE)
def test_any_label_value_round_trips_or_is_refused(value: str) -> None:
    """A valid label value is written exactly; any other is a finding (Cilium would reject a
    policy that selects by it), never a rule."""
    from cpg_core import AggregateOptions, Aggregator, parse_flow
    from cpg_core._base.labels import label_problem

    peer = {"namespace": "shop", "labels": [f"k8s:app={value}"]}
    if label_problem("app", value) is not None:
        agg = Aggregator(AggregateOptions())
        agg.add(parse_flow(flow_dict(src=peer)))
        assert not agg.plans() and agg.health(started="", ended="").findings
        return
    doc = _both_loaders(_policy_of([flow_dict(src=peer)]))
    (rule,) = doc["spec"]["ingress"]
    assert rule["fromEndpoints"][0]["matchLabels"]["app"] == value


@settings(max_examples=300, deadline=None)
@given(path=_TEXT, name=_TEXT)
def test_any_http_path_and_dns_name_round_trip(path: str, name: str) -> None:
    from cpg_core._base.l7 import dns_name, path_regex, valid_dns_name

    get = flow_dict(l7={"type": "REQUEST", "http": {"method": "GET", "url": "/" + path}})
    query = flow_dict(
        src=endpoint("shop", "cart"),
        dst=endpoint("shop", "dns"),  # an application's own resolver: its names stay rules
        direction="EGRESS",
        udp=53,
        l7={"type": "REQUEST", "dns": {"query": name}},
    )
    doc = _both_loaders(_policy_of([get, query], l7=True))
    http = doc["spec"]["ingress"][0]["toPorts"][0]["rules"]["http"][0]
    assert http["path"] == path_regex("/" + path)
    (own,) = [
        r for r in doc["spec"]["egress"] if r["toEndpoints"][0]["matchLabels"].get("app") == "dns"
    ]
    if valid_dns_name(dns_name(name)):
        assert {"matchName": dns_name(name)} in own["toPorts"][0]["rules"]["dns"]
    else:  # a name the CRD would refuse is no DNS rule: the lookup stays plain UDP/53
        assert "rules" not in own["toPorts"][0]


def test_emoji_paths_and_newline_labels_are_written_once(tmp_path: Path) -> None:
    records = [
        flow_dict(l7={"type": "REQUEST", "http": {"method": "GET", "url": "/emoji/\U0001f680"}}),
        flow_dict(src={"namespace": "shop", "labels": ["k8s:app=frontend\n"]}, tcp=9090),
    ]  # the newline label is no valid label: a finding, and the file has no rule for it
    capture = tmp_path / "c.jsonl"
    capture.write_text(jsonl(records))
    out = tmp_path_factory_dir(tmp_path)
    first = cpg("replay", str(capture), "-d", str(out), "--l7", "--no-evidence")
    assert first.returncode == 0, first.stderr
    text = (out / "shop" / "cart.yaml").read_text()
    assert "\\ud83d" not in text and '"^/emoji/\\U0001f680$"' in text
    assert '"frontend\\n"' not in text and "9090" not in text
    doc = _both_loaders(text)
    assert doc["spec"]["ingress"]
    second = cpg("replay", str(capture), "-d", str(out), "--l7", "--no-evidence")
    assert second.returncode == 0 and (out / "shop" / "cart.yaml").read_text() == text
    assert "1 unchanged" in second.stdout
    verified = cpg("verify", str(capture), "--policies", str(out))
    assert verified.returncode == 0, verified.stdout


def tmp_path_factory_dir(tmp_path: Path) -> Path:
    """Outside tmp_path: a label value ending in a newline is no valid Kubernetes label, so
    the CRD check every test's tmp_path gets would refuse the file (cpg writes it faithfully)."""
    import tempfile

    return Path(tempfile.mkdtemp(prefix="cpg-newline-", dir=tmp_path.parent))


def test_bootstrap_refuses_a_namespace_with_a_newline() -> None:
    ran = cpg("bootstrap", "-n", "shop\n")
    assert ran.returncode == 2 and "apiVersion" not in ran.stdout


# --- YAML aliases ---------------------------------------------------------------------------


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


def test_aliases_in_an_existing_policy_are_refused(tmp_path: Path) -> None:
    capture = tmp_path / "c.jsonl"
    capture.write_text(jsonl([flow_dict()]))
    out = tmp_path / "policies"
    (out / "shop").mkdir(parents=True)
    bomb = out / "shop" / "cart.yaml"
    bomb.write_text(_laughs())
    assert len(bomb.read_bytes()) < 1000
    ran = cpg("replay", str(capture), "-d", str(out), "--no-evidence")
    assert ran.returncode == 1
    assert f"{bomb}: uses YAML anchors or aliases" in ran.stderr
    assert bomb.read_text() == _laughs(), "the file is left alone"
    verified = cpg("verify", str(capture), "--policies", str(out))
    assert verified.returncode == 1 and "anchors or aliases" in verified.stderr


# --- bounded, exact input reading ---------------------------------------------------


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
def test_a_truncated_gzip_keeps_every_complete_line(tmp_path: Path, jobs: str) -> None:
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
        "-d",
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


def test_the_line_length_limit_does_not_depend_on_jobs(tmp_path: Path) -> None:
    from cpg_core._synthesis.lines import MAX_LINE_BYTES

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
            "-d",
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


def test_a_fifo_is_read_once(tmp_path: Path) -> None:
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
    ran = cpg_process("replay", str(fifo), "-d", str(tmp_path / "p"), "--no-evidence", "-j", "2")
    writer.join(10)
    assert ran.returncode == 0, ran.stderr
    assert "Read 100 lines" in ran.stdout


# --- store errors become messages ---------------------------------------------------------


def _one_flow(tmp_path: Path, **kw: Any) -> Path:
    capture = tmp_path / "one.jsonl"
    capture.write_text(jsonl([flow_dict(**kw)]))
    return capture


def _no_traceback(ran: Any) -> None:
    assert "Traceback" not in ran.stderr and "Error:" not in ran.stderr.replace("cpg: error", "")


def test_an_output_or_evidence_dir_that_is_a_file(tmp_path: Path) -> None:
    capture = _one_flow(tmp_path)
    (tmp_path / "afile").write_text("x")
    ran = cpg("replay", str(capture), "-d", str(tmp_path / "afile"), "--no-evidence")
    assert ran.returncode == 1 and "afile: is a file, not a folder" in ran.stderr
    ran = cpg(
        "replay", str(capture), "-d", str(tmp_path / "p"), "--evidence-dir", str(tmp_path / "afile")
    )
    assert ran.returncode == 1 and "afile: is a file, not a folder" in ran.stderr
    _no_traceback(ran)


def test_unreadable_evidence_is_named(tmp_path: Path) -> None:
    capture, out, evidence = _replayed(tmp_path)
    (path,) = evidence.glob("*/shop/cart.json")
    path.write_bytes(b"\xff\xfe not utf-8")
    for ran in (
        cpg("replay", str(capture), "-d", str(out), "--evidence-dir", str(evidence)),
        cpg("explain", "shop/cart", "-d", str(out), "--evidence-dir", str(evidence)),
    ):
        assert ran.returncode == 1 and f"{path}: not UTF-8" in ran.stderr
        _no_traceback(ran)
    path.unlink()
    path.mkdir()
    for ran in (
        cpg("replay", str(capture), "-d", str(out), "--evidence-dir", str(evidence)),
        cpg("explain", "shop/cart", "-d", str(out), "--evidence-dir", str(evidence)),
    ):
        assert ran.returncode == 1 and f"{path}: is a folder" in ran.stderr
        _no_traceback(ran)


def test_an_unreadable_policy_is_named(tmp_path: Path) -> None:
    import multiprocessing
    import os

    capture, out, _ = _replayed(tmp_path)
    policy = out / "shop" / "cart.yaml"
    policy.chmod(0o000)
    for folder in (tmp_path, out, out / "shop"):
        folder.chmod(0o777)
    for folder in tmp_path.parents:  # pytest's own folders are 0700: let nobody pass
        if str(folder).startswith("/tmp/"):
            folder.chmod(folder.stat().st_mode | 0o011)

    def as_nobody(queue: Any) -> None:
        os.setgid(65534)
        os.setuid(65534)
        ran = cpg("replay", str(capture), "-d", str(out), "--no-evidence")
        queue.put((ran.returncode, ran.stderr))

    queue: Any = multiprocessing.get_context("fork").Queue()
    child = multiprocessing.get_context("fork").Process(target=as_nobody, args=(queue,))
    child.start()
    code, stderr = queue.get(timeout=60)
    child.join(10)
    policy.chmod(0o644)
    assert code == 1 and f"{policy}: permission denied" in stderr


def test_a_namespace_that_is_no_namespace_never_becomes_a_path(tmp_path: Path) -> None:
    odd = endpoint("cluster-health.json", "x")
    capture = tmp_path / "odd.jsonl"
    capture.write_text(jsonl([flow_dict(dst=odd), flow_dict()]))
    out, evidence = tmp_path / "p", tmp_path / "e"
    args = ("replay", str(capture), "-d", str(out), "--evidence-dir", str(evidence))
    first = cpg(*args)
    # a finding, named, never a path (the store refuses such a path too, should one come)
    assert first.returncode == 0, first.stderr
    assert "'cluster-health.json' is not a Kubernetes namespace name" in first.stdout + first.stderr
    assert (out / "shop" / "cart.yaml").exists(), "the other policies are written"
    assert not (out / "cluster-health.json").exists()
    assert not list(evidence.glob("*/cluster-health.json/*"))
    second = cpg(*args)
    assert second.returncode == 0 and "Traceback" not in second.stderr


def test_a_full_disk_for_evidence_still_writes_the_policies(tmp_path: Path) -> None:
    import subprocess

    small = tmp_path / "small"
    small.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8k", "tmpfs", str(small)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        subprocess.run(  # fill it to the last byte
            ["dd", "if=/dev/zero", f"of={small / 'filler'}", "bs=512"], capture_output=True
        )
        records = [
            flow_dict(src=endpoint("shop", f"web-{i}"), reason=reason)
            for i in range(40)
            for reason in ("POLICY_DENIED", "CT_MAP_INSERTION_FAILED")
        ]
        capture = tmp_path / "many.jsonl"
        capture.write_text(jsonl(records))
        out = tmp_path / "p"
        ran = cpg("replay", str(capture), "-d", str(out), "--evidence-dir", str(small))
        assert ran.returncode == 1 and "No space left on device" in ran.stderr
        _no_traceback(ran)
        assert (out / "shop" / "cart.yaml").exists()
        assert not list(small.rglob("*tmp"))
    finally:
        subprocess.run(["umount", str(small)], check=True)


# --- temp files, modes, owners, links ------------------------------------------------------


def test_a_failed_commit_leaves_no_temp_file(tmp_path: Path) -> None:
    capture = tmp_path / "c.jsonl"
    capture.write_text(jsonl([flow_dict(), flow_dict(reason="CT_MAP_INSERTION_FAILED")]))
    out, evidence = tmp_path / "p", tmp_path / "e"
    args = ("replay", str(capture), "-d", str(out), "--evidence-dir", str(evidence))
    assert cpg(*args).returncode == 0
    (health,) = evidence.glob("*/cluster-health.json")
    health.unlink()
    health.mkdir()  # the rename onto it fails after everything was staged
    (health / "keep").write_text("x")
    ran = cpg(*args)
    assert ran.returncode == 1 and "could not put the new file in place" in ran.stderr
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith("tmp")]


def test_temp_files_a_killed_run_left_are_removed(tmp_path: Path) -> None:
    capture, out, evidence = _replayed(tmp_path)
    (base,) = evidence.iterdir()
    stale = [
        out / "shop" / ".cart.yaml.x1y2z3w4.cpg-tmp",
        base / "shop" / ".cart.json.a1b2c3d4.cpg-tmp",
        out / "shop" / ".cart.yaml.k_9f2m1q.tmp",  # as cpg 0.2 named them
    ]
    for path in stale:
        path.write_text("half")
    assert (
        cpg("replay", str(capture), "-d", str(out), "--evidence-dir", str(evidence)).returncode == 0
    )
    assert not any(p.exists() for p in stale)


def test_a_rewrite_keeps_mode_and_owner(tmp_path: Path) -> None:
    import os

    _, out, evidence = _replayed(tmp_path)
    policy = out / "shop" / "cart.yaml"
    policy.chmod(0o600)
    os.chown(policy, 65534, 65534)
    more = tmp_path / "more.jsonl"
    more.write_text(jsonl([flow_dict(tcp=9443)]))
    assert cpg("replay", str(more), "-d", str(out), "--evidence-dir", str(evidence)).returncode == 0
    assert "9443" in policy.read_text()
    info = policy.stat()
    assert (info.st_mode & 0o777, info.st_uid, info.st_gid) == (0o600, 65534, 65534)


def test_nothing_is_written_through_a_symlinked_folder(tmp_path: Path) -> None:
    capture = _one_flow(tmp_path)
    out, elsewhere = tmp_path / "p", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (out / "shop").symlink_to(elsewhere)
    ran = cpg("replay", str(capture), "-d", str(out), "--no-evidence")
    assert ran.returncode == 1 and f"{out / 'shop'}: is a symbolic link" in ran.stderr
    assert not list(elsewhere.iterdir())


# --- concurrent runs into the same folders --------------------------------------------------


def _evidence_rules(evidence: Path) -> dict[str, Any]:
    """Evidence without what differs between any two runs (session ids and times)."""
    out = {}
    for path in sorted(evidence.rglob("*.json")):
        if path.name == "cluster-health.json":
            continue
        doc = json.loads(path.read_text())
        out[str(path.relative_to(evidence))] = (len(doc["sessions"]), doc["rules"])
    for rules in out.values():
        for rule in rules[1]:
            rule.pop("contributing_sessions")
    return out


@pytest.mark.parametrize(("shared", "rounds"), [("0", 10), ("10", 5)])
def test_two_concurrent_runs_lose_nothing(tmp_path: Path, shared: str, rounds: int) -> None:
    """With sharing off, 150 policy files; with it on, each capture's rule is one shared
    policy both runs read, merge and write (under the folder lock)."""
    import subprocess

    from conftest import CPG, policies

    workloads = 150
    captures = []
    for name, port in (("a", 8080), ("b", 9090)):
        path = tmp_path / f"{name}.jsonl"
        path.write_text(
            jsonl(
                [
                    flow_dict(
                        dst=endpoint("shop", f"svc-{i:03}"), tcp=port, src_ip=f"10.2.{i % 200}.1"
                    )
                    for i in range(workloads)
                ]
            )
        )
        captures.append(path)

    def run(out: Path, evidence: Path, capture: Path) -> subprocess.Popen[bytes]:
        command = [CPG, "replay", str(capture), "-d", str(out), "--shared", shared]
        return subprocess.Popen(
            [*command, "--evidence-dir", str(evidence)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    seq_out, seq_ev = tmp_path / "seq" / "p", tmp_path / "seq-evidence"
    for capture in captures:
        assert run(seq_out, seq_ev, capture).wait(60) == 0
    expected_policies = policies(seq_out)
    assert len(expected_policies) == (workloads if shared == "0" else 2)
    expected_evidence = _evidence_rules(seq_ev)
    for round_ in range(rounds):
        # The same output path each round: evidence is keyed by it.
        out, evidence = tmp_path / "seq" / "p", tmp_path / f"ev-{round_}"
        shutil_rmtree(out)
        both = [run(out, evidence, capture) for capture in captures]
        assert [proc.wait(60) for proc in both] == [0, 0]
        assert policies(out) == expected_policies, f"round {round_}: a policy lost an update"
        assert _evidence_rules(evidence) == expected_evidence, f"round {round_}: evidence"


def shutil_rmtree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


# --- interrupts and killed parents ------------------------------------------------------


def _alive_with(marker: str) -> list[int]:
    """Processes whose command line mentions ``marker`` (our unique temp path)."""
    import os

    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                cmdline = handle.read().decode(errors="replace")
            with open(f"/proc/{entry}/stat") as handle:
                state = handle.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != "Z":
            found.append(int(entry))
    return found


def _wait_for(predicate: Any, seconds: float = 20) -> bool:
    import threading
    import time

    deadline = time.monotonic() + seconds
    tick = threading.Event()
    while time.monotonic() < deadline:
        if predicate():
            return True
        tick.wait(0.05)
    return False


def _default_sigint() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _endless_replay(tmp_path: Path, gz: bool) -> Any:
    """A -j 2 replay of standard input that never ends by itself: a thread feeds it flows
    (gzip-compressed or plain) until the pipe closes."""
    import gzip
    import subprocess
    import threading

    from conftest import CPG

    out = tmp_path / "endless-out"
    proc = subprocess.Popen(
        [CPG, "replay", "-", "-d", str(out), "--no-evidence", "-j", "2"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        # A shell starts background jobs with SIGINT ignored, and that is inherited: give cpg
        # the disposition a terminal's foreground process has.
        preexec_fn=_default_sigint,
    )
    block = _capture_lines(2000)

    def feed() -> None:
        assert proc.stdin is not None
        sink: Any = (
            gzip.GzipFile(fileobj=proc.stdin, mode="wb", compresslevel=1) if gz else proc.stdin
        )
        with contextlib.suppress(OSError, ValueError):
            while True:
                sink.write(block)

    threading.Thread(target=feed, daemon=True).start()
    return proc, str(out)


@pytest.mark.parametrize("gz", [False, True], ids=["stdin", "gzip"])
def test_ctrl_c_ends_a_replay(tmp_path: Path, gz: bool) -> None:
    import os
    import signal

    proc, marker = _endless_replay(tmp_path, gz)
    try:
        # Workers are running (parent + 2) and flows are flowing.
        assert _wait_for(lambda: len(_alive_with(marker)) >= 3), "the workers started"
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl+C in a terminal does
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.stderr is not None
    stderr = proc.stderr.read().decode()
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    assert _wait_for(lambda: not _alive_with(marker), 5), "no worker outlives the run"


def test_workers_die_with_a_killed_parent(tmp_path: Path) -> None:
    import os
    import signal

    proc, marker = _endless_replay(tmp_path, gz=False)
    try:
        assert _wait_for(lambda: len(_alive_with(marker)) >= 3), "the workers started"
        proc.kill()
        proc.wait(timeout=10)
        assert _wait_for(lambda: not _alive_with(marker), 10), _alive_with(marker)
    finally:
        for pid in _alive_with(marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


# --- crash: kill -9 at random points ---------------------------------------------------------


def test_crash_kill_9_at_random_points_leaves_only_whole_files(tmp_path: Path) -> None:
    """Killed at a random moment in each twelfth of a run (so that every part of it, reading,
    writing policies, writing evidence, is hit), a run leaves whole files only, and the next
    run writes what an uninterrupted one does."""
    import os
    import random
    import shutil
    import signal
    import subprocess
    import time

    from conftest import CPG, policies

    capture = tmp_path / "large.jsonl"
    capture.write_text(
        jsonl(
            [
                flow_dict(
                    dst=endpoint(f"ns-{i % 8}", f"svc-{i % 400:03}"),
                    tcp=8000 + i % 30,
                    src_ip=f"10.3.{i % 200}.{i % 7}",
                    time=f"2026-11-02T10:00:{i % 60:02}Z",
                )
                for i in range(1200)
            ]
            + [flow_dict(reason="CT_MAP_INSERTION_FAILED")]
        )
    )

    def command(out: Path, evidence: Path) -> list[str]:
        return [
            CPG,
            "replay",
            str(capture),
            "-d",
            str(out),
            "--evidence-dir",
            str(evidence),
            "-j",
            "2",
            "--shared",
            "0",  # one file per workload (the concurrent-runs test covers shared files)
        ]

    reference = tmp_path / "reference"
    started = time.monotonic()
    subprocess.run(
        command(reference, tmp_path / "ref-ev"), check=True, capture_output=True, timeout=120
    )
    duration = time.monotonic() - started
    expected = policies(reference)
    assert len(expected) == 400
    rng = random.Random(20261201)
    out, evidence = tmp_path / "out", tmp_path / "ev"
    kills = 12
    for kill in range(kills):
        shutil.rmtree(out, ignore_errors=True)
        proc = subprocess.Popen(
            command(out, evidence), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        threading_wait(0.05 + duration * rng.uniform(kill, kill + 1) / kills)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        assert _wait_for(lambda: not _alive_with(str(out)), 10), f"kill {kill}: a worker lives"
        for path in out.rglob("*.yaml"):
            assert yaml.safe_load(path.read_text())["kind"] == "CiliumNetworkPolicy", path
        for path in evidence.rglob("*.json"):
            json.loads(path.read_text())
        rerun = subprocess.run(command(out, evidence), capture_output=True, text=True, timeout=120)
        assert rerun.returncode == 0, rerun.stderr
        assert policies(out) == expected, f"kill {kill}: the rerun differs"
        assert not [p for p in tmp_path.rglob("*") if p.name.endswith("tmp")], f"kill {kill}"


def threading_wait(seconds: float) -> None:
    import threading

    threading.Event().wait(seconds)


def test_ctrl_c_while_cpg_starts_is_a_quiet_exit_130(tmp_path: Path) -> None:
    """SIGINT during start-up (at several moments, while cpg imports its modules): a quiet
    exit 130. Before cpg's own code runs, the interpreter itself is interrupted (death by the
    signal, the shell's 130, or its own start-up message); that window is the console script's
    first import, and nothing of cpg's may show a traceback after it."""
    import signal
    import subprocess
    import threading

    from conftest import CPG, EXAMPLE

    for attempt, delay in enumerate((0.0, 0.05, 0.1, 0.2, 0.3, 0.4)):
        proc = subprocess.Popen(
            [str(CPG), "replay", str(EXAMPLE), "-d", str(tmp_path / f"p{attempt}")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        threading.Event().wait(delay)  # the moment of the Ctrl+C is this test's input
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
        before_cpg = proc.returncode == -signal.SIGINT or "Fatal Python error" in err
        if "Traceback" in err:  # only from the console script's own lines, never cpg's code
            before_cpg = re.search(r'File "[^"]*/cpg_(cli|core|io|mcp)/', err) is None
            assert before_cpg, (delay, err)
        assert before_cpg or proc.returncode in (130, 0), (delay, proc.returncode, err)
