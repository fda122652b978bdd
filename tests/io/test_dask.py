"""Replay on a real Dask cluster (distributed.LocalCluster, two worker processes), from local
files and from a real S3 API (moto's server on 127.0.0.1, read with s3fs): byte for byte the
local replay, in any partitioning, and after a worker is killed mid-run."""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import random
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from conftest import cpg, cpg_process, endpoint, flow_dict
from cpg_core import AggregateOptions
from cpg_io.engines import InProcess, dask as dask_engine
from cpg_io.progress import SILENT
from cpg_io.runs._output import EvidenceSettings
from cpg_io.runs._replay import replay_capture
from cpg_io.sources import expand_inputs

distributed = pytest.importorskip("distributed")

SECRET = "s3cr3t-Do-Not-Print-9f8e7d"
CLOCK = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def s3() -> Iterator[str]:
    """moto's S3 server on 127.0.0.1; the environment the storage library reads (and that the
    cluster's worker processes inherit) points at it."""
    moto_server = pytest.importorskip("moto.server")
    pytest.importorskip("s3fs")
    port = _free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    saved = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    saved["AWS_ENDPOINT_URL_S3"] = os.environ.get("AWS_ENDPOINT_URL_S3")
    saved["AWS_DEFAULT_REGION"] = os.environ.get("AWS_DEFAULT_REGION")
    os.environ.update(
        AWS_ACCESS_KEY_ID="AKIATESTING",
        AWS_SECRET_ACCESS_KEY=SECRET,
        AWS_ENDPOINT_URL_S3=f"http://127.0.0.1:{port}",
        AWS_DEFAULT_REGION="us-east-1",
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="module")
def cluster(s3: str) -> Iterator[Any]:
    """Two worker processes (started after the S3 environment is set, so they inherit it)."""
    made = _two_workers()
    try:
        yield made
    finally:
        made.close()


def _two_workers() -> Any:
    return distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address="127.0.0.1:0",
    )


def _capture(seed: int, count: int) -> bytes:
    rng = random.Random(seed)
    pods = [
        endpoint(ns, app, identity=100 + i, pod_name=f"{app}-{i}")
        for i, (ns, app) in enumerate(
            [("shop", "frontend"), ("shop", "cart"), ("shop", "db"), ("pay", "api"), ("pay", "db")]
        )
    ]
    lines = []
    for i in range(count):
        src, dst = rng.sample(pods, 2)
        kind: dict[str, Any] = {}
        roll = rng.random()
        if roll < 0.1:
            kind = {"verdict": "FORWARDED", "reason": None}
        elif roll < 0.15:
            kind = {"reason": "CT_MAP_INSERTION_FAILED"}
        elif roll < 0.18:
            kind = {"reply": True}
        record = flow_dict(
            src,
            dst,
            time=f"2026-11-02T10:{i // 600 % 60:02d}:{i // 10 % 60:02d}.{i % 10}00Z",
            tcp=rng.choice((80, 443, 5432, 8080)),
            direction=rng.choice(("INGRESS", "EGRESS")),
            uuid=f"{seed}-{i}",
            node_name=f"node-{i % 3}",
            **kind,
        )
        line = json.dumps(record)
        if rng.random() < 0.005:
            line = line[: len(line) // 2]  # a cut line, reported as malformed
        lines.append(line + "\n")
    return "".join(lines).encode()


def _files(folder: Path) -> list[Path]:
    """An exporter's folder: a big plain file and two rotated gzip files."""
    folder.mkdir()
    big = folder / "events.log"
    big.write_bytes(_capture(1, 3000))
    (folder / "events.log.1.gz").write_bytes(gzip.compress(_capture(2, 800)))
    (folder / "events.log.2.gz").write_bytes(gzip.compress(_capture(3, 500)))
    return sorted(folder.iterdir())


def _tree(folder: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and ".lock" not in path.name
    }


def _run(inputs: list[str], out: Path, scheduler: str | None, **kw: Any) -> Any:
    kw.pop("jobs", None)
    part_bytes = kw.pop("part_bytes", None)
    engine = dask_engine.DaskEngine(scheduler, part_bytes) if scheduler is not None else InProcess()
    return replay_capture(
        expand_inputs(inputs),
        out / "policies",
        kw.pop("options", AggregateOptions()),
        evidence=EvidenceSettings(root=out / "evidence"),
        clock=lambda: CLOCK,
        session_id="the-session",
        engine=engine,
        watch=kw.pop("watch", SILENT),
        **kw,
    )


def _outcome(result: Any, out: Path) -> tuple[Any, ...]:
    stats = result.stats
    return (
        _tree(out / "policies"),
        {  # under a folder named after the policy folder's path, which differs by run
            name.split("/", 1)[1]: data for name, data in _tree(out / "evidence").items()
        },
        result.aggregator.total_flows,
        stats.lines_read,
        stats.malformed,
        sorted(stats.malformed_examples),
        stats.truncated,
    )


@pytest.mark.parametrize("range_bytes", [4096, 150_000, 1 << 30], ids=["4K", "150K", "whole"])
def test_dask_replay_equals_the_local_replay_byte_for_byte(
    cluster: Any, tmp_path: Path, range_bytes: int
) -> None:
    files = [str(p) for p in _files(tmp_path / "capture")]
    local = _run(files, tmp_path / "local", None, jobs=1)
    on_dask = _run(files, tmp_path / "dask", cluster.scheduler_address, part_bytes=range_bytes)
    assert local.stats.malformed > 0 and len(local.files) > 3
    assert _outcome(on_dask, tmp_path / "dask") == _outcome(local, tmp_path / "local")
    if range_bytes == 4096:
        parts = dask_engine.plan_parts(files, range_bytes)
        assert len(parts) > 100  # the big plain file really was cut into ranges


def _bucket(files: list[Path], folder: str = "exporter") -> str:
    import s3fs

    fs = s3fs.S3FileSystem()
    if not fs.exists("flows"):
        fs.mkdir("flows")
    for path in files:
        fs.pipe(f"flows/{folder}/{path.name}", path.read_bytes())
    return f"s3://flows/{folder}/"


def test_from_s3_with_a_worker_killed_mid_run(cluster: Any, tmp_path: Path) -> None:
    files = _files(tmp_path / "capture")
    gzipped = [p for p in files if p.suffix == ".gz"]
    # More rotated gzip files, so that the run has many tasks to lose a worker in.
    for n in range(3, 15):
        extra = tmp_path / "capture" / f"events.log.{n}.gz"
        extra.write_bytes(gzip.compress(_capture(10 + n, 400)))
        gzipped.append(extra)
    prefix = _bucket(gzipped)
    local = _run([prefix + "*.gz"], tmp_path / "local", None, jobs=1)  # from S3, in-process

    client = distributed.Client(cluster.scheduler_address)
    pids = list(client.run(os.getpid).values())
    killed: list[tuple[int, int]] = []

    class KillOne(type(SILENT)):  # type: ignore[misc]
        """Kills a worker process once two of the tasks are done and more remain."""

        def tasks(self, done: int, total: int) -> None:
            if done == 2 and not killed:
                os.kill(pids[0], signal.SIGKILL)
                killed.append((done, total))

    try:
        on_dask = _run(
            [prefix + "*.gz"], tmp_path / "dask", cluster.scheduler_address, watch=KillOne()
        )
        client.wait_for_workers(2)
        after = list(client.run(os.getpid).values())
    finally:
        client.close()
    assert killed and killed[0][0] < killed[0][1]  # killed while tasks remained
    assert pids[0] not in after  # the worker really died (its nanny started another)
    assert on_dask.inputs == [f"s3://flows/exporter/{p.name}" for p in sorted(gzipped)]
    assert _outcome(on_dask, tmp_path / "dask") == _outcome(local, tmp_path / "local")


def test_the_cli_on_s3_and_dask_equals_the_local_cli(cluster: Any, tmp_path: Path) -> None:
    files = _files(tmp_path / "capture")
    prefix = _bucket(files, "cli")
    local = cpg(
        "replay",
        str(tmp_path / "capture"),
        "-d",
        str(tmp_path / "l"),
        "--no-evidence",
        "-o",
        "json",
        "-j",
        "1",
    )
    on_dask = cpg(
        "replay",
        prefix,
        "-d",
        str(tmp_path / "d"),
        "--no-evidence",
        "-o",
        "json",
        "--engine",
        "dask",
        "--scheduler",
        cluster.scheduler_address,
        "--part-size",
        "1MiB",  # the plain file in two ranges
        "--log-level",
        "debug",
    )
    # the local engine reads the same objects, in file workers that open them themselves
    from_s3 = cpg("replay", prefix, "-d", str(tmp_path / "s"), "--no-evidence", "-j", "2")
    assert local.returncode == 0 and on_dask.returncode == 0, on_dask.stderr
    assert from_s3.returncode == 0, from_s3.stderr
    assert _tree(tmp_path / "d") == _tree(tmp_path / "l") == _tree(tmp_path / "s")
    mine, theirs = json.loads(on_dask.stdout), json.loads(local.stdout)
    assert mine["flows"] == theirs["flows"] and mine["lines_read"] == theirs["lines_read"]
    assert SECRET not in on_dask.stdout + on_dask.stderr  # not even at debug level
    checked = cpg("verify", prefix, "-d", str(tmp_path / "d"), "-o", "json")
    assert checked.returncode == 0, checked.stderr
    verdict = json.loads(checked.stdout)
    assert verdict["passed"] and verdict["candidates"]["total"] == mine["flows"]["candidate"]


def test_a_cluster_cpg_starts_itself_equals_the_local_run(tmp_path: Path) -> None:
    """``--scheduler local:2``: cpg starts its own LocalCluster (its workers forked from the
    command, while the inputs are being identified in a thread beside it) and stops it; the
    policies and the counts are those of the local engine."""
    files = _files(tmp_path / "capture")
    runs = {}
    for name, extra in {
        "local": ["-j", "1"],
        "dask": ["--engine", "dask", "--scheduler", "local:2", "--part-size", "1MiB"],
    }.items():
        ran = cpg_process(
            "replay",
            *map(str, files),
            "-d",
            str(tmp_path / name),
            "--evidence-dir",
            str(tmp_path / f"{name}-evidence"),
            "-o",
            "json",
            *extra,
        )
        assert ran.returncode == 0, ran.stderr
        runs[name] = json.loads(ran.stdout)
    assert _tree(tmp_path / "dask") == _tree(tmp_path / "local") != {}
    assert runs["dask"]["flows"] == runs["local"]["flows"]
    assert runs["dask"]["lines_read"] == runs["local"]["lines_read"] == 4300


def test_missing_extras_name_the_install_command(tmp_path: Path) -> None:
    """Without s3fs (or distributed) installed: exit 2 and the exact pip command."""
    blocker = tmp_path / "blocked"
    blocker.mkdir()
    (blocker / "s3fs.py").write_text("raise ImportError('s3fs is not installed here')\n")
    (blocker / "distributed.py").write_text("raise ImportError('no distributed here')\n")
    env = {**os.environ, "PYTHONPATH": str(blocker)}
    capture = tmp_path / "c.jsonl"
    capture.write_bytes(_capture(5, 20))
    import subprocess

    cpg_bin = str(Path(sys.executable).with_name("cpg"))
    ran = subprocess.run(
        [cpg_bin, "replay", "s3://flows/x.log", "-d", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert ran.returncode == 2 and "pip install 'cpg[s3]'" in ran.stderr, ran.stderr
    ran = subprocess.run(
        [cpg_bin, "replay", str(capture), "-d", str(tmp_path / "o"), "--engine", "dask"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert ran.returncode == 2 and "pip install 'cpg[dask]'" in ran.stderr, ran.stderr
    assert not (tmp_path / "o").exists()
    for url, extra in (("gs://b/x.log", "gcs"), ("az://c/x.log", "azure")):
        if extra == "gcs" and importlib.util.find_spec("gcsfs") is not None:
            continue
        if extra == "azure" and importlib.util.find_spec("adlfs") is not None:
            continue
        ran = subprocess.run(
            [cpg_bin, "replay", url, "-d", str(tmp_path / "o")],
            capture_output=True,
            text=True,
            check=False,
        )
        assert ran.returncode == 2 and f"pip install 'cpg[{extra}]'" in ran.stderr, ran.stderr


def test_bad_urls_say_what_to_fix(s3: str, tmp_path: Path) -> None:
    _bucket([])
    missing = cpg("replay", "s3://no-such-bucket/flows.log", "-d", str(tmp_path / "o"))
    assert missing.returncode == 1
    assert "no such object; check the bucket and the key" in missing.stderr
    unknown = cpg("replay", "zz://bucket/flows.log", "-d", str(tmp_path / "o"))
    assert unknown.returncode == 1 and "does not know the scheme zz://" in unknown.stderr
    secret_url = f"s3://AKIATESTING:{SECRET}@no-such-bucket/flows.log?sig={SECRET}"
    shown = cpg("replay", secret_url, "-d", str(tmp_path / "o"), "--log-level", "debug")
    assert shown.returncode == 2 and SECRET not in shown.stdout + shown.stderr
    assert "s3://***@no-such-bucket/flows.log?…: cpg takes no credentials" in shown.stderr
    none = cpg("replay", "s3://flows/nothing-here/*.gz", "-d", str(tmp_path / "o"))
    assert none.returncode == 1 and "matches no object" in none.stderr
    assert cpg("replay", "x.log", "--scheduler", "local:2").returncode == 2
    assert cpg("replay", "x.log", "--part-size", "1GiB").returncode == 2
    small = cpg("replay", "x.log", "--engine", "dask", "--part-size", "4KiB")
    assert small.returncode == 2 and "at least 1MiB" in small.stderr
    relative = cpg("replay", "s3://flows/x.log", "--engine", "dask", "--since", "2h")
    assert relative.returncode == 2 and "give RFC 3339 times" in relative.stderr
    bad = cpg("replay", str(tmp_path), "--engine", "dask", "--scheduler", "local:zero")
    assert bad.returncode != 0


def test_the_base_install_pulls_in_no_dask_and_no_storage_library() -> None:
    import tomllib

    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    base = " ".join(project["project"]["dependencies"]).lower()
    for name in ("dask", "distributed", "fsspec", "s3fs", "gcsfs", "adlfs", "boto"):
        assert name not in base, name
    extras = project["project"]["optional-dependencies"]
    assert {"s3", "gcs", "azure", "dask"} <= set(extras)
    probe = "import sys, cpg_cli.app, cpg_io.runs._replay; print(sorted(m for m in sys.modules if m.split('.')[0] in ('distributed', 'dask', 'fsspec', 's3fs')))"
    import subprocess

    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert ran.stdout.strip() == "[]"


def test_a_thread_may_cancel_a_dask_run(cluster: Any, tmp_path: Path) -> None:
    from cpg_io.errors import Cancelled

    files = [str(p) for p in _files(tmp_path / "capture")]
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled):
        _run(files, tmp_path / "dask", cluster.scheduler_address, cancel=cancel)
    assert not (tmp_path / "dask" / "policies").exists()


def test_progress_on_a_terminal_counts_the_cluster_tasks(cluster: Any, tmp_path: Path) -> None:
    from conftest import on_terminal

    files = _files(tmp_path / "capture")
    code, _stdout, terminal = on_terminal(
        "replay",
        *map(str, files),
        "-d",
        str(tmp_path / "o"),
        "--no-evidence",
        "--engine",
        "dask",
        "--scheduler",
        cluster.scheduler_address,
    )
    assert code == 0, terminal
    assert "on Dask, 0/3 tasks" in terminal and "on Dask, 3/3 tasks" in terminal
    assert "flows/s" in terminal


def test_workers_of_another_cpg_are_refused() -> None:
    class Workers:
        def __init__(self, versions: dict[str, str]) -> None:
            self.versions = versions

        def run(self, function: Any) -> dict[str, str]:
            return self.versions

    with pytest.raises(dask_engine.EngineError, match=r"run cpg 0\.0\.1, this is cpg .*same image"):
        dask_engine._same_cpg(Workers({"tcp://w1": "0.0.1"}), "tcp://s:8786")
    with pytest.raises(dask_engine.EngineError, match="has no workers"):
        dask_engine._same_cpg(Workers({}), "tcp://s:8786")
    from cpg_io.version import cpg_version

    dask_engine._same_cpg(Workers({"tcp://w1": cpg_version()}), "tcp://s:8786")


def test_a_time_window_holds_on_the_cluster_too(cluster: Any, tmp_path: Path) -> None:
    files = [str(p) for p in _files(tmp_path / "capture")]
    window = AggregateOptions(
        since="2026-11-02T10:01:00.000000000Z", until="2026-11-02T10:03:30.000000000Z"
    )
    local = _run(files, tmp_path / "local", None, jobs=1, options=window)
    on_dask = _run(files, tmp_path / "dask", cluster.scheduler_address, options=window)
    assert 0 < local.aggregator.decisions["outside_window"] < local.aggregator.total_flows
    assert _outcome(on_dask, tmp_path / "dask") == _outcome(local, tmp_path / "local")


def test_a_worker_thread_keeps_one_warm_aggregator_and_counts_a_part_once(
    tmp_path: Path,
) -> None:
    """Issue 28: a worker thread reads every part of a run into one aggregator (the allow
    entries of the first part are known in the second), a part it runs again (Dask computes
    lost results again) is not added twice, and collecting hands the run over once."""
    files = [str(p) for p in _files(tmp_path / "capture")]
    parts = dask_engine.plan_parts(files, 150_000)
    options = AggregateOptions()
    first = dask_engine.replay_part(parts[0], options, "run-a")
    slow_before = _slow_path_calls(lambda: dask_engine.replay_part(parts[1], options, "run-b"))
    warm = _slow_path_calls(lambda: dask_engine.replay_part(parts[1], options, "run-a"))
    assert warm < slow_before, "the second part of a run found the first part's entries"
    again = dask_engine.replay_part(parts[0], options, "run-a")
    assert again == first  # read once: the receipt of the first reading
    (gathered,) = dask_engine.collect("run-a")
    assert set(gathered.parts) == {(p.file, p.index) for p in parts[:2]}
    alone = [dask_engine.collect("run-b")[0]]
    for part in parts[:1]:
        dask_engine.replay_part(part, options, "run-c")
    alone += dask_engine.collect("run-c")
    assert gathered.flows == sum(p.flows for p in alone) > 0
    assert dask_engine.collect("run-a") == [] and dask_engine.forget("run-a") == 0


def _slow_path_calls(run: Any) -> int:
    from cpg_core._synthesis.aggregate import Aggregator

    calls = 0
    real = Aggregator._candidate

    def counted(self: Any, flow: Any, *args: Any) -> Any:
        nonlocal calls
        calls += 1
        return real(self, flow, *args)

    Aggregator._candidate = counted  # type: ignore[method-assign]
    try:
        run()
    finally:
        Aggregator._candidate = real  # type: ignore[method-assign]
    return calls


def test_a_worker_killed_after_every_task_is_done_loses_nothing(tmp_path: Path) -> None:
    """The parts a dead worker had gathered are read again before anything is written. A
    cluster of its own: the killed worker is not waited for."""
    import logging

    files = [str(p) for p in _files(tmp_path / "capture")]
    local = _run(files, tmp_path / "local", None, jobs=1)
    own = _two_workers()
    killed: list[int] = []
    try:
        with distributed.Client(own.scheduler_address) as client:
            pids = list(client.run(os.getpid).values())

        class KillAtTheEnd(type(SILENT)):  # type: ignore[misc]
            def tasks(self, done: int, total: int) -> None:
                if done == total and not killed:
                    os.kill(pids[0], signal.SIGKILL)
                    killed.append(total)

        with _warnings(logging.getLogger("cpg")) as warned:
            on_dask = _run(
                files,
                tmp_path / "dask",
                own.scheduler_address,
                watch=KillAtTheEnd(),
                part_bytes=4096,
            )
    finally:
        own.close()
    assert killed and killed[0] > 10
    assert any("reading them again" in w for w in warned), warned
    assert _outcome(on_dask, tmp_path / "dask") == _outcome(local, tmp_path / "local")


class _Collected(list[str]):
    pass


def _warnings(logger: Any) -> Any:
    import contextlib
    import logging

    @contextlib.contextmanager
    def catching() -> Iterator[_Collected]:
        seen = _Collected()

        class Keep(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                seen.append(record.getMessage())

        handler = Keep(logging.WARNING)
        logger.addHandler(handler)
        try:
            yield seen
        finally:
            logger.removeHandler(handler)

    return catching()


def test_a_json_array_is_one_part(tmp_path: Path) -> None:
    """A JSON array (or pretty-printed records) cannot be cut into byte ranges: a Dask run
    reads it as one part, as a gzip stream is read."""
    from conftest import flow_dict

    records = [flow_dict(tcp=8000 + n, extra="x" * 1000) for n in range(400)]
    array = tmp_path / "array.json"
    array.write_text(json.dumps(records, indent=2))
    lines = tmp_path / "lines.jsonl"
    lines.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert len(dask_engine.plan_parts([str(lines)], 100_000)) > 1
    (whole,) = dask_engine.plan_parts([str(array)], 100_000)
    assert whole.start == 0
