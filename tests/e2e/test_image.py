"""The container image (issues 29 and 44), built with ``make image`` and run with podman,
offline: the base is a Debian bookworm made here with mmdebstrap and imported, and pip takes
cpg's dependencies from the wheelhouse ``make install`` builds (the build has no network at
all). The image runs as its non-root user on a read-only root, replays the example into a
mounted folder with the same policies as a local run, reads a capture from a real S3 API,
follows the project's fake relay on the host network, and is saved as an OCI archive that
skopeo reads; a one-line source change rebuilds cpg's own layer alone, and every extra
builds with no network."""

from __future__ import annotations

import fcntl
import hashlib
import itertools
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from conftest import EXAMPLE, ROOT, cpg
from cpg_io.version import cpg_version
from fake_relay import example_responses, fake_relay

pytestmark = pytest.mark.image

REQUIRED = os.environ.get("CPG_REQUIRE_PODMAN") == "1"  # set by .ci/run: never skip there
PACKAGES = "python3,python3-venv,ca-certificates,git,openssh-client"
"""The test base: what the default base has, plus git and ssh so that the image builds
offline (it installs the TOOLS with apt only when the base lacks them)."""
TEST_BASE = os.environ.get(
    "CPG_IMAGE_BASE",
    f"localhost/cpg-test-base:bookworm-{hashlib.sha256(PACKAGES.encode()).hexdigest()[:8]}",
)
IMAGE = f"localhost/cpg:{cpg_version()}"
USER = "10001:10001"
WHEELHOUSE = Path(sys.prefix) / "wheelhouse"
DEBIAN = [
    "deb http://deb.debian.org/debian bookworm main",
    "deb http://deb.debian.org/debian bookworm-updates main",
    "deb http://deb.debian.org/debian-security bookworm-security main",
]


def _missing() -> str | None:
    for tool in ("podman", "skopeo", "mmdebstrap", "make"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian's podman, runc, skopeo, mmdebstrap)"
    if os.geteuid() != 0:
        return "the image test runs podman as root"
    if not WHEELHOUSE.is_dir():
        return f"{WHEELHOUSE}: no wheelhouse; make install builds it"
    return None


def _containers_conf(folder: Path) -> Path:
    """runc (crun refuses hybrid cgroups), cgroupfs, a file event log, and ulimits no higher
    than this machine's hard limits (root here cannot raise them)."""
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nproc = min(resource.getrlimit(resource.RLIMIT_NPROC)[1], 32768)
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    nproc = min(nproc, pid_max)
    conf = folder / "containers.conf"
    conf.write_text(
        "[containers]\n"
        f'default_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]\n'
        "[engine]\n"
        'runtime = "runc"\n'
        'cgroup_manager = "cgroupfs"\n'
        'events_logger = "file"\n'
    )
    return conf


def run(*args: str, timeout: float = 600, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    ran = subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kwargs)
    assert ran.returncode == 0, f"{' '.join(args)}\n{ran.stdout}\n{ran.stderr}"
    return ran


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    reason = _missing()
    if reason:
        if REQUIRED:
            raise AssertionError(reason)
        pytest.skip(reason)
    folder = tmp_path_factory.mktemp("podman")
    saved = os.environ.get("CONTAINERS_CONF")
    os.environ["CONTAINERS_CONF"] = str(_containers_conf(folder))
    # One build at a time when two workers get image tests: the second reuses the layers.
    lock = (tmp_path_factory.getbasetemp().parent / "cpg-image.lock").open("w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        exists = subprocess.run(["podman", "image", "exists", TEST_BASE], timeout=60)
        if exists.returncode != 0:
            tar = folder / "base.tar"
            run(
                "mmdebstrap",
                "--quiet",
                "--variant=minbase",
                f"--include={PACKAGES}",
                "--dpkgopt=path-exclude=/usr/share/doc/*",
                "--dpkgopt=path-exclude=/usr/share/man/*",
                "--dpkgopt=path-exclude=/usr/share/locale/*",
                "bookworm",
                str(tar),
                *DEBIAN,
            )
            run("podman", "import", "--quiet", str(tar), TEST_BASE)
            tar.unlink()
        make_image(ROOT, IMAGE)
        fcntl.flock(lock, fcntl.LOCK_UN)
        yield IMAGE
    finally:
        lock.close()
        if saved is None:
            os.environ.pop("CONTAINERS_CONF", None)
        else:
            os.environ["CONTAINERS_CONF"] = saved


def make_image(context: Path, image: str, *settings: str) -> str:
    """``make image`` with no network, on the test base, from the wheelhouse; the log."""
    return run(
        "make", "image", f"--assume-old={sys.prefix}/.installed-stamp",  # the wheelhouse is there
        f"BASE={TEST_BASE}", "OFFLINE=1", f"VENV={sys.prefix}", f"IMAGE={image}", *settings,
        cwd=context,
    ).stdout  # fmt: skip


def layers(image: str) -> list[str]:
    inspected = json.loads(run("podman", "image", "inspect", image).stdout)[0]
    return list(inspected["RootFS"]["Layers"])


def podman_run(
    image: str, data: Path, *args: str, network: str = "none", options: Sequence[str] = ()
) -> str:
    """The image as the cluster runs it: its own user, read-only root, no capabilities."""
    ran = run(
        "podman",
        "run",
        "--rm",
        f"--network={network}",
        "--read-only",
        "--cap-drop=ALL",
        "--security-opt=no-new-privileges",
        "--tmpfs=/tmp",
        "-v",
        f"{data}:/data",
        *options,
        image,
        *args,
        timeout=120,
    )
    return ran.stdout


def writable_by_the_image(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    os.chown(folder, 10001, 10001)
    return folder


def policies(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*.yaml"))}


def test_the_image_runs_as_its_user_and_says_its_version(image: str) -> None:
    inspected = json.loads(run("podman", "image", "inspect", image).stdout)[0]
    config = inspected["Config"]
    assert config["User"] == USER and config["WorkingDir"] == "/data"
    assert config["Entrypoint"] == ["cpg"]
    labels = inspected["Labels"]
    assert labels["org.opencontainers.image.version"] == cpg_version()
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    if head.returncode == 0:  # a git checkout (CI's clone is one): the commit it was built from
        assert labels["org.opencontainers.image.revision"] == head.stdout.strip()
    version = run("podman", "run", "--rm", "--network=none", image, "version").stdout
    assert version.split()[:2] == ["cpg", cpg_version()]
    who = run("podman", "run", "--rm", "--entrypoint", "id", image).stdout
    assert "uid=10001(cpg) gid=10001(cpg)" in who


def test_a_one_line_source_change_rebuilds_only_cpgs_layer(image: str, tmp_path: Path) -> None:
    """Dependencies in a layer of their own: after a change to cpg's code every layer below
    cpg's is the same (nothing to rebuild or push) and cpg's own is new."""
    context = tmp_path / "context"
    for name in ("Containerfile", ".containerignore", "Makefile", "pyproject.toml", "README.md"):
        context.mkdir(exist_ok=True)
        shutil.copy2(ROOT / name, context / name)
    shutil.copytree(ROOT / "src", context / "src", ignore=shutil.ignore_patterns("__pycache__"))
    changed = context / "src" / "cpg_cli" / "__init__.py"
    changed.write_text(changed.read_text() + "CHANGED_FOR_THE_IMAGE_TEST = True\n")
    rebuilt = f"{image}-changed"
    log = make_image(context, rebuilt)
    try:
        before, after = layers(image), layers(rebuilt)
        assert len(before) == len(after) >= 3
        assert before[:-1] == after[:-1], "a layer below cpg's own was rebuilt"
        assert before[-1] != after[-1], "cpg's own layer did not change"
        steps = log.split("STEP ")
        (installing,) = [step for step in steps if "python3 -m venv /opt/pip" in step]
        assert "--> Using cache" in installing  # the dependencies were not installed again
        found = run(
            "podman", "run", "--rm", "--network=none", "--entrypoint", "python", rebuilt,
            "-c", "import cpg_cli; print(cpg_cli.CHANGED_FOR_THE_IMAGE_TEST)",
        ).stdout  # fmt: skip
        assert found.strip() == "True"
    finally:
        subprocess.run(["podman", "rmi", "--force", rebuilt], capture_output=True, timeout=120)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_image_replays_a_capture_from_s3(image: str, tmp_path: Path) -> None:
    """The archive overlay's job: cpg replay s3://… in the image, against a real S3 API (moto's
    server on the host's 127.0.0.1), writes what a local replay of the same file writes."""
    moto_server = pytest.importorskip("moto.server")
    s3fs = pytest.importorskip("s3fs")
    assert cpg("replay", str(EXAMPLE), "-d", str(tmp_path / "local")).returncode == 0
    port = _free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        endpoint = f"http://127.0.0.1:{port}"
        credentials = {"AWS_ACCESS_KEY_ID": "AKIATESTING", "AWS_SECRET_ACCESS_KEY": "testing"}
        bucket = s3fs.S3FileSystem(
            key=credentials["AWS_ACCESS_KEY_ID"],
            secret=credentials["AWS_SECRET_ACCESS_KEY"],
            endpoint_url=endpoint,
        )
        bucket.mkdir("flows")
        bucket.pipe("flows/exporter/drops.jsonl", EXAMPLE.read_bytes())
        data = writable_by_the_image(tmp_path / "data")
        environment = {**credentials, "AWS_ENDPOINT_URL_S3": endpoint}
        environment["AWS_DEFAULT_REGION"] = "us-east-1"
        options = [f"--env={key}={value}" for key, value in environment.items()]
        out = podman_run(
            image, data, "replay", "s3://flows/exporter/drops.jsonl", "-d", "policies",
            "-o", "json", network="host", options=options,
        )  # fmt: skip
    finally:
        server.stop()
    assert len(json.loads(out)["policies"]) == 6
    assert policies(data / "policies") == policies(tmp_path / "local")


def test_every_extra_builds_with_no_network(image: str) -> None:
    """The extras the default image leaves out (and no tools: cpg alone, smaller)."""
    other = f"{image}-extras"
    make_image(ROOT, other, "EXTRAS=gcs,azure,dask", "TOOLS=")
    try:
        imported = run(
            "podman", "run", "--rm", "--network=none", "--entrypoint", "python", other, "-c",
            "import gcsfs, adlfs, distributed, cpg_io.engines.dask; print('imported')",
        ).stdout  # fmt: skip
        assert imported.strip() == "imported"
        bare = subprocess.run(
            ["podman", "run", "--rm", "--network=none", "--entrypoint", "python", other,
             "-c", "import s3fs"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert bare.returncode != 0 and "No module named 's3fs'" in bare.stderr
        assert layers(other)[0] == layers(image)[0]  # the same base
    finally:
        subprocess.run(["podman", "rmi", "--force", other], capture_output=True, timeout=120)


def test_replay_in_the_image_writes_what_a_local_replay_writes(image: str, tmp_path: Path) -> None:
    assert cpg("replay", str(EXAMPLE), "-d", str(tmp_path / "local")).returncode == 0
    data = writable_by_the_image(tmp_path / "data")
    shutil.copy(EXAMPLE, data / "drops.jsonl")
    out = podman_run(
        image, data, "replay", "drops.jsonl", "-d", "policies", "-o", "json",
        "--evidence-dir", ".cpg-evidence",
    )  # fmt: skip
    assert len(json.loads(out)["policies"]) == 6
    written = data / "policies"
    assert policies(written) == policies(tmp_path / "local")
    owners = {(p.stat().st_uid, p.stat().st_gid) for p in written.rglob("*")}
    assert owners == {(10001, 10001)}
    assert list((data / ".cpg-evidence").rglob("*.json"))


def test_generate_in_the_image_follows_a_relay_on_the_host_network(
    image: str, tmp_path: Path
) -> None:
    assert cpg("replay", str(EXAMPLE), "-d", str(tmp_path / "local")).returncode == 0
    data = writable_by_the_image(tmp_path / "data")
    with fake_relay(example_responses()) as (relay, address):
        podman_run(
            image,
            data,
            "generate",
            "--server",
            address,
            "-d",
            "policies",
            "--duration",
            "5s",
            "--flush-interval",
            "1s",
            "--quiet",
            network="host",
        )
    assert relay.requests and relay.requests[0].follow
    assert policies(data / "policies") == policies(tmp_path / "local")


def test_the_image_saved_as_an_oci_archive_reads_back_with_skopeo(
    image: str, tmp_path: Path
) -> None:
    archive = tmp_path / "cpg.oci.tar"
    run("podman", "save", "--quiet", "--format", "oci-archive", "-o", str(archive), image)
    inspected = json.loads(run("skopeo", "inspect", f"oci-archive:{archive}").stdout)
    assert inspected["Architecture"] and inspected["Os"] == "linux"
    assert inspected["Labels"]["org.opencontainers.image.title"] == "cpg"
    config = json.loads(run("skopeo", "inspect", "--config", f"oci-archive:{archive}").stdout)
    assert config["config"]["User"] == USER and config["config"]["Entrypoint"] == ["cpg"]
    # Nothing of the build in a layer: not the wheelhouse (mounted on /mnt), not the sources,
    # no pip.
    listing = run(
        "podman",
        "run",
        "--rm",
        "--network=none",
        "--entrypoint",
        "sh",
        image,
        "-c",
        'ls / /opt/cpg/bin; test -z "$(ls -A /mnt)" && test ! -e /src && test ! -e /opt/pip'
        " && test ! -e /cpg-root && echo clean",
    ).stdout
    assert listing.rstrip().endswith("clean") and "pip" not in listing.split()


def test_the_image_has_git_and_ssh_for_cpg_propose(image: str) -> None:
    """The propose overlay runs the same image as every other."""
    tools = run(
        "podman", "run", "--rm", "--network=none", "--entrypoint", "sh", image, "-c",
        "git --version && ssh -V 2>&1 && id -u && cpg version",
    ).stdout  # fmt: skip
    assert "git version" in tools and "OpenSSH" in tools and "\n10001\n" in tools
    assert f"cpg         {cpg_version()}" in tools


CALLER = "cpg-caller"
"""A normal user of this machine, made for the test: the README's rootless line runs as it."""


def _readme_podman_lines() -> dict[str, str]:
    """The README's ``podman run`` lines by the comment above each (rootless, root)."""
    lines = (ROOT / "README.md").read_text().splitlines()
    found = {}
    for above, line in itertools.pairwise(lines):
        if line.startswith("podman run "):
            found["rootless" if "rootless" in above else "root"] = line
    return found


def _caller() -> tuple[int, int, Path]:
    """The uid, gid and home of a normal user with subordinate ids (rootless podman's
    needs), made once."""
    import pwd

    try:
        entry = pwd.getpwnam(CALLER)
    except KeyError:
        run("useradd", "--create-home", "--shell", "/bin/sh", CALLER)
        entry = pwd.getpwnam(CALLER)
    if CALLER not in Path("/etc/subuid").read_text():
        run("usermod", "--add-subuids", "400000-465535", "--add-subgids", "400000-465535", CALLER)
    return entry.pw_uid, entry.pw_gid, Path(entry.pw_dir)


def test_the_readme_podman_lines_run_as_the_caller(image: str, tmp_path: Path) -> None:
    """A folder of the caller's own: the README's line writes the policies there, owned by
    the caller (the image's own user, uid 10001, could not write it): as root, and as a
    normal user with rootless podman."""
    lines = _readme_podman_lines()
    assert set(lines) == {"rootless", "root"}, lines
    assert all(f"localhost/cpg:{cpg_version()}" in line for line in lines.values())
    mine = tmp_path / "mine"
    mine.mkdir()
    shutil.copy(EXAMPLE, mine / "drops.jsonl")
    run("sh", "-c", lines["root"], cwd=mine)
    assert {p.stat().st_uid for p in (mine / "policies").rglob("*")} == {os.getuid()}
    assert list((mine / "policies").rglob("*.yaml"))

    uid, gid, home = _caller()
    # A folder the caller can reach (pytest's are root's alone).
    shared = Path("/tmp") / f"cpg-caller-{os.getpid()}"
    shutil.rmtree(shared, ignore_errors=True)
    shared.mkdir(mode=0o755)
    folder, runtime = shared / "folder", shared / "runtime"
    conf = shutil.copy(os.environ["CONTAINERS_CONF"], shared / "containers.conf")
    env = {
        "HOME": str(home),
        "XDG_RUNTIME_DIR": str(runtime),
        "PATH": "/usr/bin:/bin",
        "CONTAINERS_CONF": str(conf),
    }
    as_caller = ["runuser", "-u", CALLER, "--", "env", *(f"{k}={v}" for k, v in env.items())]
    try:
        archive = shared / "image.tar"
        run("podman", "save", "--quiet", "-o", str(archive), image)
        archive.chmod(0o644)
        Path(conf).chmod(0o644)
        folder.mkdir()
        runtime.mkdir(mode=0o700)
        shutil.copy(EXAMPLE, folder / "drops.jsonl")
        for path in (folder, folder / "drops.jsonl", runtime):
            os.chown(path, uid, gid)
        run(*as_caller, "podman", "load", "--quiet", "-i", str(archive))
        run(*as_caller, "sh", "-c", f"cd {folder} && {lines['rootless']}")
        written = list((folder / "policies").rglob("*"))
        assert written and {p.stat().st_uid for p in written} == {uid}
        assert {p.name for p in written} >= {p.name for p in (mine / "policies").rglob("*")}
    finally:  # the caller's copy of the image goes with its storage
        subprocess.run(
            [*as_caller, "podman", "system", "reset", "-f"], capture_output=True, timeout=120
        )
        shutil.rmtree(shared, ignore_errors=True)
