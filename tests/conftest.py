"""Shared test helpers: paths to ../shared, the CRD validator, a flow factory, the captures
several modules use, and ``cpg``: the CLI run in-process (``cpg_process`` when the process
boundary is the point)."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import yaml

from browsing import CHROMEDRIVER, CHROMIUM, NO_BROWSER, missing
from cpg_core.lint import lint_text
from cpg_io.crd_schema import crd_schema_errors

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
CRD_PATH = SHARED / "schemas" / "ciliumnetworkpolicies.yaml"
SCHEMA_PATH = ROOT / "src" / "cpg_io" / "schemas" / "ciliumnetworkpolicy-v2.json"
"""The CRD's schema as cpg ships it (descriptions removed): every written policy is checked
against it, and against Kubernetes' label syntax."""
CORPUS = SHARED / "corpus"
EXAMPLE = ROOT / "examples" / "drops.jsonl"


@functools.cache
def _crd_validator() -> Any:
    import jsonschema

    return jsonschema.Draft7Validator(json.loads(SCHEMA_PATH.read_text()))


_SOURCES = ("k8s:", "any:", "reserved:", "cilium:", "unspec:", "container:")


def label_errors(document: Any) -> list[str]:
    """Selector labels Kubernetes would refuse (the CRD leaves their syntax to the API
    server): every matchLabels and matchExpressions key and value in the document."""
    from cpg_core._base.labels import label_problem

    errors: list[str] = []

    def check(key: str, value: str, where: str) -> None:
        for source in _SOURCES:
            if key.startswith(source):
                key = key[len(source) :]
                break
        problem = label_problem(key, value)
        if problem:
            errors.append(f"{where}: {problem}")

    def walk(node: Any, where: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "matchLabels" and isinstance(value, dict):
                    for k, v in value.items():
                        check(str(k), str(v), where)
                elif key == "matchExpressions" and isinstance(value, list):
                    for expression in value:
                        for v in expression.get("values") or [""]:
                            check(str(expression.get("key")), str(v), where)
                else:
                    walk(value, f"{where}.{key}")
        elif isinstance(node, list):
            for n, item in enumerate(node):
                walk(item, f"{where}[{n}]")

    walk(document, "")
    return errors


def crd_errors(document: Any) -> list[str]:
    """Schema violations of one CiliumNetworkPolicy document, and selector labels Kubernetes
    would refuse (empty when valid)."""
    found = [
        f"{list(e.absolute_path)}: {e.message}" for e in _crd_validator().iter_errors(document)
    ]
    return found + label_errors(document)


def assert_crd_valid(text: str, *, required: bool = False) -> None:
    """Validate against the CRD schema cpg ships (``required`` is kept for the callers that
    once needed ../shared: the schema is always here now)."""
    document = yaml.safe_load(text)
    assert document["apiVersion"] == "cilium.io/v2"
    assert document["kind"] == "CiliumNetworkPolicy"
    errors = crd_errors(document)
    assert not errors, "\n".join(errors)


@pytest.fixture(autouse=True)
def _private_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Evidence written by tests (and by cpg subprocesses) never lands in the real cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
    # No test reaches a real cluster through the machine's kubeconfig; tests that want one
    # point KUBECONFIG at a fake.
    monkeypatch.setenv("KUBECONFIG", str(tmp_path_factory.mktemp("no-kube") / "config"))


@pytest.fixture(autouse=True)
def _validate_written_policies(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every policy YAML a test leaves in its tmp_path must validate against the CRD."""
    if "tmp_path" not in request.fixturenames:
        yield
        return
    tmp_path: Path = request.getfixturevalue("tmp_path")
    yield
    for path in tmp_path.rglob("*.yaml"):
        if path.name.startswith("not-a-policy") or path.is_symlink():
            continue  # hostile inputs a test wrote on purpose
        if "pre-commit-cache" in path.parts:
            continue  # pre-commit's own clone of this repository, not a test's output
        text = path.read_text()
        if any(isinstance(event, yaml.AliasEvent) for event in yaml.parse(text)):
            continue  # an alias bomb a test wrote on purpose: cpg never writes aliases
        for document in yaml.safe_load_all(text):
            if isinstance(document, dict) and document.get("kind") == "CiliumNetworkPolicy":
                errors = crd_errors(document)
                assert not errors, f"{path}: " + "\n".join(errors)
                labels = (document.get("metadata") or {}).get("labels") or {}
                if labels.get("app.kubernetes.io/managed-by") == "cpg":  # cpg's: lints clean
                    findings = lint_text(text, str(path), schema=crd_schema_errors)
                    assert not findings, "\n".join(
                        f"{f.code} {f.field}: {f.message}" for f in findings
                    )


def endpoint(
    ns: str | None = None, app: str | None = None, *labels: str, **extra: Any
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if ns is not None:
        out["namespace"] = ns
    all_labels = [f"k8s:app={app}"] if app is not None else []
    if ns is not None and app is not None:
        all_labels.append(f"k8s:io.kubernetes.pod.namespace={ns}")
    all_labels += list(labels)
    if all_labels:
        out["labels"] = all_labels
    out.update(extra)
    return out


WORLD = {"identity": 2, "labels": ["reserved:world"]}


def flow_dict(
    src: dict[str, Any] | None = None,
    dst: dict[str, Any] | None = None,
    *,
    direction: str = "INGRESS",
    verdict: str = "DROPPED",
    reason: str | None = "POLICY_DENIED",
    tcp: int | None = 8080,
    udp: int | None = None,
    icmp4: int | None = None,
    icmp6: int | None = None,
    sctp: int | None = None,
    src_ip: str = "10.0.0.1",
    dst_ip: str = "10.0.0.2",
    reply: bool | None = False,
    time: str = "2026-11-02T10:00:00Z",
    **extra: Any,
) -> dict[str, Any]:
    """A ``{"flow": ...}`` record as ``hubble observe -o jsonpb`` writes it."""
    body: dict[str, Any] = {"time": time, "verdict": verdict}
    body["IP"] = {"source": src_ip, "destination": dst_ip}
    if udp is not None:
        body["l4"] = {"UDP": {"source_port": 40000, "destination_port": udp}}
    elif icmp4 is not None:
        body["l4"] = {"ICMPv4": {"type": icmp4}}
    elif icmp6 is not None:
        body["l4"] = {"ICMPv6": {"type": icmp6}}
    elif sctp is not None:
        body["l4"] = {"SCTP": {"source_port": 40000, "destination_port": sctp}}
    elif tcp is not None:
        body["l4"] = {
            "TCP": {"source_port": 40000, "destination_port": tcp, "flags": {"SYN": True}}
        }
    body["source"] = src if src is not None else endpoint("shop", "frontend")
    body["destination"] = dst if dst is not None else endpoint("shop", "cart")
    body["traffic_direction"] = direction
    if reason is not None:
        body["drop_reason_desc"] = reason
    if reply is not None:
        body["is_reply"] = reply
    body.update(extra)
    return {"flow": body}


def jsonl(records: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


# --- the CLI ----------------------------------------------------------------------------------

CPG = str(Path(sys.executable).with_name("cpg"))


@attrs.frozen
class CpgRun:
    """How a ``cpg`` command ended: the fields of subprocess.CompletedProcess that tests read."""

    returncode: int
    stdout: str
    stderr: str


def cpg(*args: str, stdin: bytes | None = None, cwd: Path | None = None) -> CpgRun:
    """Run ``cpg ARGS`` in this process (Typer's CliRunner), as the installed command would.
    An exception the command did not turn into an exit code fails the test."""
    from typer.testing import CliRunner

    from cpg_cli.app import app

    root = logging.getLogger()
    handlers = list(root.handlers)
    with contextlib.chdir(cwd) if cwd is not None else contextlib.nullcontext():
        result = CliRunner().invoke(app, list(args), input=stdin, env={"NO_COLOR": "1"})
    root.handlers[:] = handlers  # the command's stderr handler dies with its run
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return CpgRun(result.exit_code, result.stdout, result.stderr)


def cpg_process(
    *args: str, stdin: bytes | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """The installed ``cpg`` as a subprocess: for entry points, signals and process exits."""
    return subprocess.run(
        [CPG, *args],
        input=stdin.decode() if stdin is not None else None,
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "NO_COLOR": "1"},
        timeout=120,
    )


def policies(out: Path) -> dict[str, str]:
    """Every policy file under ``out`` by its relative path."""
    return {str(p.relative_to(out)): p.read_text() for p in sorted(out.rglob("*.yaml"))}


# --- captures more than one module uses ------------------------------------------------------


def explain_capture(tmp_path: Path) -> tuple[Path, int]:
    """A capture whose candidates all become rules, mixed with flows that never do."""
    frontend, cart, api = (
        endpoint("shop", "frontend"),
        endpoint("shop", "cart"),
        endpoint("pay", "api"),
    )
    candidates = [
        *[
            flow_dict(
                src=endpoint("shop", "frontend", pod_name=f"frontend-{i}"),
                dst=cart,
                tcp=8080,
                time=f"2026-11-02T10:00:0{i}Z",
            )
            for i in range(5)
        ],
        flow_dict(src=frontend, dst=cart, tcp=8443),
        flow_dict(src=api, dst=cart, tcp=8080, reason=None),
        flow_dict(src=cart, dst=api, direction="EGRESS", tcp=9000),
        flow_dict(src=cart, dst=WORLD, dst_ip="203.0.113.7", direction="EGRESS", tcp=443),
        flow_dict(
            src=cart,
            dst={"identity": 7, "labels": ["reserved:kube-apiserver"]},
            direction="EGRESS",
            tcp=6443,
        ),
        flow_dict(src=cart, dst=WORLD, dst_ip="2001:db8::7", direction="EGRESS", icmp6=128),
    ]
    others = [
        flow_dict(verdict="FORWARDED", reason=None),
        flow_dict(reply=True),
        flow_dict(reason="POLICY_DENY", tcp=5432),
        flow_dict(reason="CT_MAP_INSERTION_FAILED"),
    ]
    path = tmp_path / "capture.jsonl"
    path.write_text(jsonl(candidates + others))
    return path, len(candidates)


NODES = ("node-a", "node-b", "node-c")
PODS = {
    "web": endpoint("shop", "web"),
    "cart": endpoint("shop", "cart"),
    "db": endpoint("data", "db"),
    "bare": endpoint("shop", None, pod_name="bare-pod"),
}
REASONS = {
    "CT_MAP_INSERTION_FAILED": 5,
    "SERVICE_BACKEND_NOT_FOUND": 3,
    "DROP_EP_NOT_READY": 4,
    "STALE_OR_UNROUTABLE_IP": 2,
    "IS_A_CLUSTERIP": 2,
    "POLICY_DENY": 3,
    "AUTH_REQUIRED": 2,
}


def triage_records() -> list[dict[str, Any]]:
    records = []
    i = 0
    for reason, count in REASONS.items():
        for n in range(count):
            src, dst = ("web", "cart") if n % 2 else ("cart", "db")
            records.append(
                flow_dict(
                    src=PODS[src],
                    dst=PODS[dst],
                    direction="INGRESS" if n % 3 else "EGRESS",
                    reason=reason,
                    node_name=NODES[(i := i + 1) % 3],
                    tcp=5432,
                    time=f"2026-11-02T10:{n:02d}:{i % 60:02d}Z",
                    **(
                        {"ingress_denied_by": [{"name": "deny-db", "namespace": "data"}]}
                        if reason == "POLICY_DENY"
                        else {}
                    ),
                )
            )
    for _ in range(3):
        records.append(flow_dict(src=PODS["web"], dst=PODS["cart"], reply=True, node_name="node-a"))
        records.append(
            flow_dict(src=PODS["web"], dst=PODS["cart"], verdict="FORWARDED", reason=None)
        )
    for port in (8080, 8081, 8082):
        records.append(flow_dict(src=PODS["web"], dst=PODS["cart"], tcp=port, node_name="node-b"))
    records.append(flow_dict(src=WORLD, dst=PODS["web"], src_ip="203.0.113.1", tcp=443))
    records.append(flow_dict(src=PODS["bare"], dst=PODS["cart"], tcp=9000))
    return records


def self_signed(tmp_path: Path, name: str, subject_alt_name: str) -> tuple[Path, Path]:
    """A throwaway key and self-signed certificate (CN ``name``), for a test server and its
    CA alike (skips without openssl)."""
    import shutil

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    key, cert = tmp_path / f"{name}.key", tmp_path / f"{name}.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            f"/CN={name}",
            "-addext",
            f"subjectAltName={subject_alt_name}",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return key, cert


@pytest.fixture
def relay_cert(tmp_path: Path) -> tuple[Path, Path]:
    """A key and self-signed certificate for hubble-relay.test."""
    return self_signed(tmp_path, "hubble-relay.test", "DNS:hubble-relay.test")


def wait_for(predicate: Callable[[], object], seconds: float = 20) -> bool:
    """Whether ``predicate`` holds within ``seconds`` (checked every 20 ms on an event)."""
    import time

    deadline = time.monotonic() + seconds
    tick = threading.Event()
    while time.monotonic() < deadline:
        if predicate():
            return True
        tick.wait(0.02)
    return False


def run_until_sigterm(
    args: list[str], ready: Callable[[], object], seconds: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run ``args`` until ``ready`` holds (or ``seconds`` pass), then stop it as Kubernetes
    does (SIGTERM): a live run ends on what it did, not on a clock."""
    import signal

    proc = subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    try:
        wait_for(ready, seconds)
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return subprocess.CompletedProcess(args, proc.returncode, stdout, stderr)


def on_terminal(
    *args: str,
    until: bytes | re.Pattern[bytes] | None = None,
    then: Callable[[subprocess.Popen[bytes]], None] | None = None,
) -> tuple[int, str, str]:
    """Run the installed ``cpg ARGS`` with stderr on a pseudo-terminal, as a person at a
    terminal would. When ``until`` (bytes, or a pattern) shows up on the terminal,
    ``then(process)`` is called (to send a signal). Returns the exit code, stdout and
    everything the terminal received."""
    import pty

    primary, secondary = pty.openpty()
    proc = subprocess.Popen(
        [CPG, *args],
        stdout=subprocess.PIPE,
        stderr=secondary,
        env={**os.environ, "NO_COLOR": "1", "TERM": "xterm", "COLUMNS": "160"},
    )
    os.close(secondary)
    received = b""
    while True:
        try:
            data = os.read(primary, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        received += data
        if (
            until is not None
            and then is not None
            and (until in received if isinstance(until, bytes) else until.search(received))
        ):
            then(proc)
            then = None
    stdout = proc.stdout.read() if proc.stdout is not None else b""
    proc.wait(timeout=60)
    os.close(primary)
    return proc.returncode, stdout.decode(errors="replace"), received.decode(errors="replace")


TESTS = Path(__file__).resolve().parent
FAST = {"core", "test_architecture.py", "test_parity.py"}
"""What ``make test-fast`` runs: the core's unit tests and the repository's own rules."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks each test by where it lives: tests/core (and the repository rules) are ``unit``
    tests of plain values; tests/io, cli, mcp and e2e start processes, servers and browsers."""
    for item in items:
        place = Path(str(item.fspath)).resolve().relative_to(TESTS).parts[0]
        item.add_marker(pytest.mark.unit if place in FAST else pytest.mark.integration)
    # The image tests wait on mmdebstrap and podman (minutes, little CPU): first, so that one
    # worker does them while the other gets through the rest, instead of ending the run alone.
    items.sort(key=lambda item: item.get_closest_marker("image") is None)


# --- a real browser for the report tests ----------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        missing(NO_BROWSER)
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--host-resolver-rules=MAP * ~NOTFOUND",  # no name resolves: nothing leaves
        "--window-size=1400,900",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd(
        "Network.setBlockedURLs", {"urls": ["http://*", "https://*", "ws://*", "wss://*"]}
    )
    try:
        yield driver
    finally:
        driver.quit()
