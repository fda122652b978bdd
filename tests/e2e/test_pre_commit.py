"""The pre-commit hooks (issue 30), run by pre-commit itself, as a repository of policies runs
them: its ``.pre-commit-config.yaml`` names this repository at HEAD, pre-commit installs the
hooks into their own environment (offline, from the wheelhouse ``make install`` builds) and
runs them on a Git repository with a bad, then a good, policy staged. The hooks' environment
is built once for the whole run (pre-commit's store, shared by the workers under its own
lock), as a developer's machine keeps it between commits."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import cpg

ROOT = Path(__file__).resolve().parents[2]
WHEELHOUSE = Path(os.environ.get("CPG_WHEELHOUSE", Path(sys.prefix) / "wheelhouse"))

BAD = {
    "apiVersion": "cilium.io/v2",
    "kind": "CiliumNetworkPolicy",
    "metadata": {"name": "api", "namespace": "shop"},
    "spec": {
        "endpointSelector": {"matchLabels": {"app": "api"}},
        "ingress": [{"fromEndpoints": [{}]}],
    },
}


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


@pytest.fixture(scope="session")
def pre_commit_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pre-commit's store for the whole run: beside the workers' own temporary folders when
    the tests run in several (pre-commit locks it while it installs)."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "pre-commit-home"


def _gitops(tmp_path: Path, home: Path, hooks: list[dict[str, Any]]) -> tuple[Path, dict[str, str]]:
    """A Git repository for policies whose config runs ``hooks`` of this repository at HEAD,
    and the environment pre-commit runs in (offline)."""
    if not (WHEELHOUSE / ".").is_dir() or not list(WHEELHOUSE.glob("hatchling-*.whl")):
        if os.environ.get("CI"):
            raise AssertionError(f"{WHEELHOUSE}: no wheelhouse; make install builds it")
        pytest.skip(f"{WHEELHOUSE}: no wheelhouse (make install builds it)")
    if shutil.which("git") is None:
        raise AssertionError("git is needed for pre-commit")
    repo = tmp_path / "gitops"
    (repo / "policies" / "shop").mkdir(parents=True)
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "ci@example.com")
    _git(repo, "config", "user.name", "CI")
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    config = {"repos": [{"repo": str(ROOT), "rev": head, "hooks": hooks}]}
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path / "home"),
        "PRE_COMMIT_HOME": str(home),
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(WHEELHOUSE),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    return repo, env


def _run(
    repo: Path, env: dict[str, str], hook: str, *args: str
) -> subprocess.CompletedProcess[str]:
    """``pre-commit run HOOK`` with what is staged (everything: ``git add -A`` first)."""
    _git(repo, "add", "-A")
    pre_commit = Path(sys.executable).with_name("pre-commit")
    return subprocess.run(
        [str(pre_commit), "run", hook, *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_pre_commit_hooks_fail_on_a_bad_policy_then_pass(
    tmp_path: Path, pre_commit_home: Path
) -> None:
    repo, env = _gitops(tmp_path, pre_commit_home, [{"id": "cpg-lint"}])
    policy = repo / "policies" / "shop" / "not-a-policy-api.yaml"  # bad on purpose at first
    policy.write_text(yaml.safe_dump(BAD, sort_keys=False))
    (repo / "notes.yaml").write_text("not: a policy\n")
    failed = _run(repo, env, "cpg-lint")
    assert failed.returncode != 0, failed.stdout + failed.stderr
    assert "CPG005 empty-peer-selector" in failed.stdout, failed.stdout + failed.stderr
    assert "notes.yaml" not in failed.stdout  # YAML that is no policy is left alone
    good = dict(
        BAD, spec={**BAD["spec"], "ingress": [{"fromEndpoints": [{"matchLabels": {"app": "web"}}]}]}
    )
    policy.write_text(yaml.safe_dump(good, sort_keys=False))
    passed = _run(repo, env, "cpg-lint")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "Passed" in passed.stdout
    # a root-level file named like an option is linted as a file, never read as the option
    (repo / "--context=evil.yaml").write_text(yaml.safe_dump(BAD, sort_keys=False))
    sneaky = _run(repo, env, "cpg-lint")
    assert sneaky.returncode != 0, sneaky.stdout + sneaky.stderr
    assert "--context=evil.yaml" in sneaky.stdout and "CPG005" in sneaky.stdout, sneaky.stdout


def test_the_verify_hook_takes_its_capture_from_the_config(
    tmp_path: Path, pre_commit_home: Path
) -> None:
    """cpg-verify takes its capture and policy folder as the config's args."""
    verify = {"id": "cpg-verify", "args": ["denied.jsonl", "--policies", "cpg"]}
    repo, env = _gitops(tmp_path, pre_commit_home, [verify])
    made = cpg("replay", str(ROOT / "examples" / "drops.jsonl"), "-d", str(repo / "cpg"))
    assert made.returncode == 0, made.stderr
    shutil.copy(ROOT / "examples" / "drops.jsonl", repo / "denied.jsonl")
    verified = _run(repo, env, "cpg-verify", "--all-files")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    (repo / "cpg" / "shop" / "cart.yaml").unlink()  # a policy the capture needs is gone
    broken = _run(repo, env, "cpg-verify", "--all-files")
    assert broken.returncode != 0 and "exit code: 3" in broken.stdout, broken.stdout
    assert "NOT admitted  ingress shop/frontend → shop/cart TCP/8080" in broken.stdout
