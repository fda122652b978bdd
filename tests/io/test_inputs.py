"""Every real capture read right (issue 14): inputs that are not Hubble captures fail loudly,
saying what they look like; the shares of malformed lines; container-log wrapped lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import EXAMPLE, cpg, flow_dict, jsonl, policies

FIX = "give cpg a capture from 'hubble observe -o jsonpb'"

NOT_CAPTURES = {
    "policy.yaml": (
        b"apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata:\n  name: x\n",
        "Kubernetes YAML",
    ),
    "compact.txt": (
        b"Nov  2 10:00:00.123: shop/frontend-6d8f:40000 (ID:1234) -> shop/cart-7c9:8080 "
        b"(ID:5678) policy-verdict:none INGRESS DENIED (TCP Flags: SYN)\n",
        "Hubble compact text (hubble observe -o compact)",
    ),
    "table.txt": (
        b"TIMESTAMP             SOURCE              DESTINATION         TYPE            VERDICT"
        b"     SUMMARY\nNov  2 10:00:00.123   shop/frontend:40000 shop/cart:8080      "
        b"policy-verdict  DROPPED     TCP Flags: SYN\n",
        "Hubble table text (hubble observe -o table)",
    ),
    "dict.txt": (
        b"  TIMESTAMP: Nov  2 10:00:00.123\n     SOURCE: shop/frontend:40000\n"
        b"DESTINATION: shop/cart:8080\n       TYPE: policy-verdict\n    VERDICT: DROPPED\n",
        "Hubble dict text (hubble observe -o dict)",
    ),
    "other.json": (b'{"items": [], "kind": "List"}\n', "JSON that is not a Hubble flow record"),
    "cut-off.json": (
        json.dumps(flow_dict()).encode()[:40] + b"\n",
        "JSON that does not parse (a pretty-printed or cut-off document?)",
    ),
    "binary.bin": (bytes(range(256)) * 8, "binary data"),
}


@pytest.mark.parametrize("name", sorted(NOT_CAPTURES))
def test_an_input_that_is_not_a_capture_fails_and_writes_nothing(name: str, tmp_path: Path) -> None:
    data, looks_like = NOT_CAPTURES[name]
    path = tmp_path / name
    path.write_bytes(data)
    out, evidence = tmp_path / "policies", tmp_path / "evidence"
    ran = cpg("replay", str(path), "-d", str(out), "--evidence-dir", str(evidence))
    assert ran.returncode == 1, ran.stdout
    assert f"{path}: not a single Hubble flow record in it: it looks like {looks_like}" in (
        ran.stderr
    )
    assert FIX in ran.stderr
    assert not out.exists() and not evidence.exists(), "nothing written, not even a folder"


def test_an_empty_input_is_fine_and_writes_nothing(tmp_path: Path) -> None:
    for data in (b"", b"\n\n  \n"):
        path = tmp_path / "empty.jsonl"
        path.write_bytes(data)
        out, evidence = tmp_path / "policies", tmp_path / "evidence"
        ran = cpg("replay", str(path), "-d", str(out), "--evidence-dir", str(evidence))
        assert ran.returncode == 0, ran.stderr
        assert not out.exists() and not evidence.exists()


def test_max_malformed(tmp_path: Path) -> None:
    good = jsonl([flow_dict(dst_ip=f"10.0.0.{n}") for n in range(3)])
    path = tmp_path / "mostly-broken.jsonl"
    path.write_text(good + "junk\n" * 4)
    out = tmp_path / "policies"
    refused = cpg("replay", str(path), "-d", str(out), "--no-evidence")
    assert refused.returncode == 1
    assert "4 of 7 lines (57.1 %) are not Hubble records, more than --max-malformed 50 %" in (
        refused.stderr
    )
    assert not out.exists()
    allowed = cpg("replay", str(path), "-d", str(out), "--no-evidence", "--max-malformed", "60")
    assert allowed.returncode == 0, allowed.stderr
    assert "malformed lines skipped: 4 of 7 (57.1 %; line 4, 5, 6, 7)" in allowed.stdout
    assert (out / "shop" / "cart.yaml").exists()
    as_json = cpg("replay", str(path), "-d", str(out), "--no-evidence", "--max-malformed", "0")
    assert as_json.returncode == 1
    out_of_range = cpg("replay", str(path), "--max-malformed", "101")
    assert out_of_range.returncode == 2


def test_the_example_with_two_malformed_lines_states_the_share(tmp_path: Path) -> None:
    ran = cpg("replay", str(EXAMPLE), "-d", str(tmp_path / "p"), "--no-evidence")
    assert ran.returncode == 0
    assert "malformed lines skipped: 2 of 67 (3.0 %; line 32, 46)" in ran.stdout


def test_container_log_lines_are_read(tmp_path: Path) -> None:
    lines = EXAMPLE.read_text().splitlines()
    wrapped = tmp_path / "fluent-bit.log"
    wrapped.write_text(
        "".join(f"2026-11-02T10:00:00.{n:09d}Z stdout F {line}\n" for n, line in enumerate(lines))
    )
    plain_out, wrapped_out = tmp_path / "plain", tmp_path / "wrapped"
    assert cpg("replay", str(EXAMPLE), "-d", str(plain_out), "--no-evidence").returncode == 0
    assert cpg("replay", str(wrapped), "-d", str(wrapped_out), "--no-evidence").returncode == 0
    from conftest import policies

    assert policies(plain_out) == policies(wrapped_out)


def test_verify_refuses_an_input_that_is_not_a_capture(tmp_path: Path) -> None:
    out = tmp_path / "policies"
    assert cpg("replay", str(EXAMPLE), "-d", str(out), "--no-evidence").returncode == 0
    data, looks_like = NOT_CAPTURES["policy.yaml"]
    path = tmp_path / "policy.yaml"
    path.write_bytes(data)
    ran = cpg("verify", str(path), "-d", str(out))
    assert ran.returncode == 1 and looks_like in ran.stderr


def test_verify_and_explain_understand_port_ranges(tmp_path: Path) -> None:
    ports = (8080, 8081, 8082, 8084)
    capture = tmp_path / "ports.jsonl"
    capture.write_text(jsonl([flow_dict(tcp=port) for port in ports]))
    out = tmp_path / "policies"
    evidence = tmp_path / "evidence"
    ran = cpg("replay", str(capture), "-d", str(out), "--evidence-dir", str(evidence), "--verify")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    text = (out / "shop" / "cart.yaml").read_text()
    assert 'port: "8080"\n        endPort: 8082\n' in text and 'port: "8084"' in text
    # the port in the gap stays denied
    gap = tmp_path / "gap.jsonl"
    gap.write_text(jsonl([flow_dict(tcp=8083)]))
    checked = cpg("verify", str(gap), "-d", str(out), "-o", "json")
    assert checked.returncode == 3
    assert json.loads(checked.stdout)["candidates"] == {"total": 1, "admitted": 0}
    # evidence stays per observed port: explain finds a port inside the range
    explained = cpg(
        "explain",
        "shop/cart",
        "-d",
        str(out),
        "--evidence-dir",
        str(evidence),
        "--port",
        "8081",
        "-o",
        "json",
    )
    assert explained.returncode == 0, explained.stderr
    (rule,) = json.loads(explained.stdout)["matched_rules"]
    assert rule["port"] == "8081" and rule["flow_count"] == 1


def _exporter_folder(tmp_path: Path) -> tuple[Path, Path]:
    """An exporter's folder (rotated files, the older ones gzipped, one of them with a
    malformed line) and the concatenation of its files in name order."""
    import gzip

    from conftest import explain_capture

    capture, _ = explain_capture(tmp_path)
    lines = capture.read_text().splitlines(keepends=True)
    lines += EXAMPLE.read_text().splitlines(keepends=True)
    folder = tmp_path / "hubble"
    folder.mkdir()
    thirds = [lines[: len(lines) // 3], lines[len(lines) // 3 : 2 * len(lines) // 3]]
    thirds.append(lines[2 * len(lines) // 3 :])
    (folder / "events.log").write_text("".join(thirds[0]))
    (folder / "events.log.1.gz").write_bytes(gzip.compress("".join(thirds[1]).encode()))
    (folder / "events.log.2.gz").write_bytes(gzip.compress("".join(thirds[2]).encode()))
    (folder / ".hidden").write_text("not read\n")
    joined = tmp_path / "all.jsonl"
    joined.write_text("".join(thirds[0] + thirds[1] + thirds[2]))
    return folder, joined


def _evidence(root: Path) -> dict[str, Any]:
    """Every evidence rule, without what names the run (session ids)."""
    out = {}
    for path in sorted(root.rglob("*.json")):
        if path.name == "cluster-health.json":
            continue
        doc = json.loads(path.read_text())
        for rule in doc["rules"]:
            rule.pop("contributing_sessions")
            rule.pop("by_session", None)  # by session id: the inputs differ by design
        out[f"{path.parent.name}/{path.name}"] = doc["rules"]
    return out


def test_a_folder_or_glob_of_exporter_files_equals_their_concatenation(tmp_path: Path) -> None:
    from conftest import policies

    folder, joined = _exporter_folder(tmp_path)
    runs = {
        "concatenated": [str(joined)],
        "folder -j 1": [str(folder), "-j", "1"],
        "folder -j 2": [str(folder), "-j", "2"],
        "glob": [str(folder / "events.log*"), "-j", "2"],
        "files": [
            str(folder / "events.log"),
            str(folder / "events.log.1.gz"),
            str(folder / "events.log.2.gz"),
        ],
    }
    results = {}
    for name, args in runs.items():
        out, evidence = tmp_path / name / "policies", tmp_path / name / "evidence"
        ran = cpg("replay", *args, "-d", str(out), "--evidence-dir", str(evidence), "-o", "json")
        assert ran.returncode == 0, (name, ran.stderr)
        report = json.loads(ran.stdout)
        results[name] = (
            policies(out),
            _evidence(evidence),
            report["flows"],
            report["malformed"]["count"],
            report["lines_read"],
            report["findings"],
        )
    expected = results.pop("concatenated")
    assert expected[0] and expected[2]["candidate"] > 10
    for name, got in results.items():
        assert got == expected, name
    # malformed lines are named with their file
    folder_run = cpg("replay", str(folder), "-d", str(tmp_path / "x"), "--no-evidence")
    assert "events.log.2.gz:" in folder_run.stderr or "events.log.1.gz:" in folder_run.stderr


def test_inputs_that_give_nothing_are_named(tmp_path: Path) -> None:
    empty = tmp_path / "empty-folder"
    empty.mkdir()
    ran = cpg("replay", str(empty), "-d", str(tmp_path / "p"))
    assert ran.returncode == 1 and "no files in this folder" in ran.stderr
    ran = cpg("replay", str(tmp_path / "nothing-*.log"), "-d", str(tmp_path / "p"))
    assert ran.returncode == 1 and "matches no file" in ran.stderr
    ran = cpg("replay", "-", str(EXAMPLE), "-d", str(tmp_path / "p"))
    assert ran.returncode == 1 and "cannot be combined" in ran.stderr


def test_every_record_shape_hubble_writes_is_read(tmp_path: Path) -> None:
    """The exporter's agent and debug events, node status, lost events and the legacy bare
    flow of `hubble observe -o json` before v0.11: none is malformed."""
    path = tmp_path / "shapes.jsonl"
    path.write_text(
        "\n".join(
            [
                '{"agent_event":{"type":"AGENT_STARTED"},"node_name":"n1","time":"2026-11-02T10:00:00Z"}',
                '{"debug_event":{"type":"DBG_GENERIC","message":"x"},"node_name":"n1"}',
                '{"node_status":{"state_change":"NODE_CONNECTED","node_names":["n1"]}}',
                '{"lost_events":{"source":"HUBBLE_RING_BUFFER","num_events_lost":"1"}}',
                json.dumps(flow_dict()["flow"]),  # bare, legacy -o json
                json.dumps(flow_dict()),  # wrapped, -o jsonpb / exporter
            ]
        )
        + "\n"
    )
    ran = cpg("replay", str(path), "-d", str(tmp_path / "p"), "--no-evidence", "-o", "json")
    assert ran.returncode == 0, ran.stderr
    report = json.loads(ran.stdout)
    assert report["malformed"]["count"] == 0
    assert report["lost_events"] == 1 and report["flows"]["total"] == 2


def test_a_file_url_reads_with_worker_processes(tmp_path: Path) -> None:
    """A file:// input big enough for the parallel path (workers reopen it by its path)."""
    capture = tmp_path / "big.jsonl"
    copies = 20 * 1024 * 1024 // len(EXAMPLE.read_bytes()) + 1
    capture.write_bytes(EXAMPLE.read_bytes() * copies)
    by_url = cpg("replay", f"file://{capture}", "-d", str(tmp_path / "url"), "-j", "2")
    assert by_url.returncode == 0, by_url.stderr
    by_path = cpg("replay", str(capture), "-d", str(tmp_path / "path"), "-j", "2")
    assert by_path.returncode == 0, by_path.stderr
    assert policies(tmp_path / "url") == policies(tmp_path / "path")
    assert len(policies(tmp_path / "url")) == 6


def test_a_json_array_and_pretty_printed_records_read_as_their_lines(tmp_path: Path) -> None:
    """A capture as a JSON array, or as records pretty-printed one after the other (``hubble
    observe -o json | jq .``), was refused; both read as the JSON lines they hold, with
    worker processes too, and a cut-off end is one malformed record, not a failed run."""
    import gzip

    records = [
        flow_dict(tcp=8080),
        flow_dict(tcp=8443),
        flow_dict(tcp=9000, extra_field="x" * 200_000),  # longer than one read
    ]
    lines = tmp_path / "lines.jsonl"
    lines.write_text(jsonl(records))
    expected = cpg("replay", str(lines), "-d", str(tmp_path / "expected"), "--no-evidence")
    assert expected.returncode == 0, expected.stderr
    shapes = {
        "array.json": json.dumps(records, indent=2).encode(),
        "compact-array.json": json.dumps(records).encode(),
        "pretty.json": b"".join(json.dumps(r, indent=2).encode() + b"\n" for r in records),
        "bom-array.json": b"\xef\xbb\xbf" + json.dumps(records).encode(),
    }
    shapes["pretty.json.gz"] = gzip.compress(shapes["pretty.json"])
    for name, data in shapes.items():
        path = tmp_path / name
        path.write_bytes(data)
        for jobs in ("1", "2"):
            out = tmp_path / f"out-{name}-{jobs}"
            ran = cpg(
                "replay", str(path), "-d", str(out), "--no-evidence", "-j", jobs, "-o", "json"
            )
            assert ran.returncode == 0, (name, ran.stderr)
            assert json.loads(ran.stdout)["malformed"]["count"] == 0, name
            assert policies(out) == policies(tmp_path / "expected"), name
    cut = tmp_path / "cut.json"
    cut.write_bytes(shapes["array.json"][:-30])
    ran = cpg("replay", str(cut), "-d", str(tmp_path / "cut-out"), "--no-evidence", "-o", "json")
    assert ran.returncode == 0, ran.stderr
    report = json.loads(ran.stdout)
    assert report["malformed"]["count"] == 1 and report["flows"]["candidate"] == 2
