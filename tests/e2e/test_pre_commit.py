"""The pre-commit hooks (issue 30), run by pre-commit itself: ``pre-commit try-repo`` installs
this repository's hooks into their own environment (offline, from the wheelhouse ``make
install`` builds) and runs them on a Git repository with a bad, then a good, policy staged."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

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


def _try_repo(
    repo: Path, env: dict[str, str], hook: str, *args: str
) -> subprocess.CompletedProcess[str]:
    pre_commit = Path(sys.executable).with_name("pre-commit")
    return subprocess.run(
        [str(pre_commit), "try-repo", str(ROOT), hook, *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _gitops(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A Git repository for policies, and the environment pre-commit runs in (offline)."""
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
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path / "home"),
        "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-cache"),
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(WHEELHOUSE),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    return repo, env


def test_pre_commit_hooks_fail_on_a_bad_policy_then_pass(tmp_path: Path) -> None:
    repo, env = _gitops(tmp_path)
    policy = repo / "policies" / "shop" / "not-a-policy-api.yaml"  # bad on purpose at first
    policy.write_text(yaml.safe_dump(BAD, sort_keys=False))
    (repo / "notes.yaml").write_text("not: a policy\n")
    _git(repo, "add", "-A")
    failed = _try_repo(repo, env, "cpg-lint")
    assert failed.returncode != 0, failed.stdout + failed.stderr
    assert "CPG005 empty-peer-selector" in failed.stdout, failed.stdout + failed.stderr
    assert "notes.yaml" not in failed.stdout  # YAML that is no policy is left alone
    good = dict(
        BAD, spec={**BAD["spec"], "ingress": [{"fromEndpoints": [{"matchLabels": {"app": "web"}}]}]}
    )
    policy.write_text(yaml.safe_dump(good, sort_keys=False))
    _git(repo, "add", "-A")
    passed = _try_repo(repo, env, "cpg-lint")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "Passed" in passed.stdout
    # a root-level file named like an option is linted as a file, never read as the option
    (repo / "--context=evil.yaml").write_text(yaml.safe_dump(BAD, sort_keys=False))
    _git(repo, "add", "-A")
    sneaky = _try_repo(repo, env, "cpg-lint")
    assert sneaky.returncode != 0, sneaky.stdout + sneaky.stderr
    assert "--context=evil.yaml" in sneaky.stdout and "CPG005" in sneaky.stdout, sneaky.stdout


def test_the_verify_hook_takes_its_capture_from_the_config(tmp_path: Path) -> None:
    """cpg-verify, as a repository's .pre-commit-config.yaml runs it (this repository at
    HEAD, the capture and the folder as args)."""
    repo, env = _gitops(tmp_path)
    # cpg-verify takes its capture and folder from the repository's config
    made = cpg("replay", str(ROOT / "examples" / "drops.jsonl"), "-d", str(repo / "cpg"))
    assert made.returncode == 0, made.stderr
    shutil.copy(ROOT / "examples" / "drops.jsonl", repo / "denied.jsonl")
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    config = {
        "repos": [
            {
                "repo": str(ROOT),
                "rev": head,
                "hooks": [{"id": "cpg-verify", "args": ["denied.jsonl", "--policies", "cpg"]}],
            }
        ]
    }
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    _git(repo, "add", "-A")
    pre_commit = Path(sys.executable).with_name("pre-commit")
    verified = subprocess.run(
        [str(pre_commit), "run", "cpg-verify", "--all-files"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
    (repo / "cpg" / "shop" / "cart.yaml").unlink()  # a policy the capture needs is gone
    _git(repo, "add", "-A")
    broken = subprocess.run(
        [str(pre_commit), "run", "cpg-verify", "--all-files"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert broken.returncode != 0 and "exit code: 3" in broken.stdout, broken.stdout
    assert "NOT admitted  ingress shop/frontend → shop/cart TCP/8080" in broken.stdout
