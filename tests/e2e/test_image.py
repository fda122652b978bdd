"""The container image (issue 29), built with ``make image`` and run with podman, offline:
the base is a Debian bookworm made here with mmdebstrap and imported, and pip takes cpg's
dependencies from the wheelhouse ``make install`` builds (the build has no network at all).
The image runs as its non-root user on a read-only root, replays the example into a mounted
folder with the same policies as a local run, follows the project's fake relay on the host
network, and is saved as an OCI archive that skopeo reads."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import EXAMPLE, ROOT, cpg
from cpg_io.version import cpg_version
from fake_relay import example_responses, fake_relay

pytestmark = pytest.mark.image

REQUIRED = os.environ.get("CPG_REQUIRE_PODMAN") == "1"  # set by .ci/run: never skip there
PACKAGES = "python3,python3-venv,ca-certificates,git,openssh-client"
"""The test base: what the default base has, plus git and ssh so that the propose target
builds offline too (it installs them with apt only when the base lacks them)."""
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
        run("make", "image", f"BASE={TEST_BASE}", "OFFLINE=1", f"IMAGE={IMAGE}", cwd=ROOT)
        run("make", "image", f"BASE={TEST_BASE}", "OFFLINE=1", "TARGET=propose", cwd=ROOT)
        fcntl.flock(lock, fcntl.LOCK_UN)
        yield IMAGE
    finally:
        lock.close()
        if saved is None:
            os.environ.pop("CONTAINERS_CONF", None)
        else:
            os.environ["CONTAINERS_CONF"] = saved


def podman_run(image: str, data: Path, *args: str, network: str = "none") -> str:
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
    config = json.loads(run("podman", "image", "inspect", image).stdout)[0]["Config"]
    assert config["User"] == USER and config["WorkingDir"] == "/data"
    assert config["Entrypoint"] == ["cpg"]
    version = run("podman", "run", "--rm", "--network=none", image, "version").stdout
    assert version.split()[:2] == ["cpg", cpg_version()]
    who = run("podman", "run", "--rm", "--entrypoint", "id", image).stdout
    assert "uid=10001(cpg) gid=10001(cpg)" in who


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
    # Nothing of the build host in a layer: not the wheelhouse, not the sources, no pip.
    listing = run(
        "podman",
        "run",
        "--rm",
        "--network=none",
        "--entrypoint",
        "sh",
        image,
        "-c",
        "ls / /opt/cpg/bin; test ! -e /wheels && test ! -e /src && echo clean",
    ).stdout
    assert listing.rstrip().endswith("clean") and "pip" not in listing.split()


def test_the_propose_target_adds_git_and_ssh_and_stays_non_root(image: str) -> None:
    propose = f"{image}-propose"  # make image TARGET=propose, as the propose overlay names it
    config = json.loads(run("podman", "image", "inspect", propose).stdout)[0]["Config"]
    assert config["User"] == USER and config["Entrypoint"] == ["cpg"]
    tools = run(
        "podman", "run", "--rm", "--network=none", "--entrypoint", "sh", propose, "-c",
        "git --version && ssh -V 2>&1 && id -u && cpg version",
    ).stdout  # fmt: skip
    assert "git version" in tools and "OpenSSH" in tools and "\n10001\n" in tools
    assert f"cpg         {cpg_version()}" in tools
