"""Review in Git (issue 16): evidence that travels with the policies, redacted evidence."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import CPG, EXAMPLE

GIT = shutil.which("git")
IPV4 = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}\b")


def run(*args: str, cwd: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    """The installed cpg in ``cwd`` with an empty cache of its own: nothing from elsewhere."""
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "NO_COLOR": "1"}
    env.pop("CPG_EVIDENCE_DIR", None)
    env.pop("CPG_OUTPUT_DIR", None)
    return subprocess.run(
        [CPG, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.skipif(GIT is None, reason="git is not installed")
def test_a_reviewers_clone_finds_the_evidence(tmp_path: Path) -> None:
    assert GIT is not None
    author = tmp_path / "author"
    author.mkdir()
    shutil.copy(EXAMPLE, author / "drops.jsonl")
    first = run(
        "replay",
        "drops.jsonl",
        "-d",
        "policies",
        "--evidence-dir",
        ".cpg-evidence",
        cwd=author,
        cache=tmp_path / "author-cache",
    )
    assert first.returncode == 0, first.stderr
    assert (author / ".cpg-evidence" / "policies" / "shop" / "cart.json").exists()
    # later runs find the folder by themselves
    again = run("replay", "drops.jsonl", "-d", "policies", cwd=author, cache=tmp_path / "c2")
    assert again.returncode == 0 and "unchanged" in again.stdout
    assert not (tmp_path / "c2").exists(), "the cache was not used"
    git = {
        "GIT_AUTHOR_NAME": "a",
        "GIT_AUTHOR_EMAIL": "a@x",
        "GIT_COMMITTER_NAME": "a",
        "GIT_COMMITTER_EMAIL": "a@x",
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
    }
    for command in (["init", "-q"], ["add", "policies", ".cpg-evidence"], ["commit", "-qm", "p"]):
        subprocess.run([GIT, *command], cwd=author, env=git, check=True)
    reviewer = tmp_path / "elsewhere" / "review"
    subprocess.run([GIT, "clone", "-q", str(author), str(reviewer)], env=git, check=True)
    explained = run(
        "explain", "shop/cart", "-d", "policies", "--json", cwd=reviewer, cache=tmp_path / "rc"
    )
    assert explained.returncode == 0, explained.stderr
    assert json.loads(explained.stdout)["matched_rules"]
    reported = run("report", "-d", "policies", cwd=reviewer, cache=tmp_path / "rc")
    assert reported.returncode == 0, reported.stderr
    # the second run replayed the same capture: its counts replaced the first's (§D24)
    assert "rules justified by 29 flows" in reported.stdout
    assert "| ingress | TCP/8080 from shop/app=frontend | 5 |" in reported.stdout
    assert not (tmp_path / "rc").exists()


def test_redacted_evidence_keeps_no_sample_ip(tmp_path: Path) -> None:
    out, evidence = tmp_path / "policies", tmp_path / ".cpg-evidence"
    ran = run(
        "replay",
        str(EXAMPLE),
        "-d",
        str(out),
        "--evidence-dir",
        str(evidence),
        "--evidence-redact",
        cwd=tmp_path,
        cache=tmp_path / "cache",
    )
    assert ran.returncode == 0, ran.stderr
    assert "Evidence redacted (--evidence-redact)" in ran.stdout
    policies_text = "\n".join(p.read_text() for p in out.rglob("*.yaml"))
    files = list(evidence.rglob("*.json"))
    assert files
    assert any(path.name == "cluster-health.json" for path in files)
    for path in files:
        doc = json.loads(path.read_text())
        for rule in doc.get("rules", []):
            for sample in rule["samples"]:
                assert "ip" not in sample["src"] and "ip" not in sample["dst"]
        # what is left that looks like an address is a CIDR peer the policy names itself
        for address in IPV4.findall(path.read_text()):
            assert address in policies_text, (path, address)
    plain = run(
        "replay",
        str(EXAMPLE),
        "-d",
        str(tmp_path / "p2"),
        "--evidence-dir",
        str(tmp_path / "e2"),
        cwd=tmp_path,
        cache=tmp_path / "cache",
    )
    assert plain.returncode == 0
    assert any(
        IPV4.search(p.read_text()) and '"ip"' in p.read_text()
        for p in (tmp_path / "e2").rglob("*.json")
    )


def _kustomize_build(folder: Path) -> list[Path]:
    """What `kubectl kustomize` would gather, checked the way it would fail: every listed
    resource exists; folders are followed through their own kustomization.yaml."""
    import yaml

    doc = yaml.safe_load((folder / "kustomization.yaml").read_text())
    assert doc["kind"] == "Kustomization"
    found = []
    for entry in doc["resources"]:
        path = folder / entry
        assert path.exists(), f"{folder}/kustomization.yaml lists {entry}, which is missing"
        found += _kustomize_build(path) if path.is_dir() else [path]
    return found


def test_kustomize_lists_cpgs_files_and_leaves_humans_alone(tmp_path: Path) -> None:
    from conftest import cpg, flow_dict, jsonl

    out = tmp_path / "policies"
    assert (
        cpg("replay", str(EXAMPLE), "-d", str(out), "--no-evidence", "--kustomize").returncode == 0
    )
    cpg_files = {p for p in out.rglob("*.yaml") if p.name != "kustomization.yaml"}
    assert set(_kustomize_build(out)) == cpg_files
    # a human adds a file and lists it; another one they do not list
    human = out / "shop" / "allow-probes.yaml"
    human.write_text(
        "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata:\n  name: probes\n"
    )
    (out / "shop" / "notes.yaml").write_text("# not a resource\n")
    shop = out / "shop" / "kustomization.yaml"
    shop.write_text(shop.read_text().replace("resources:\n", "resources:\n- allow-probes.yaml\n"))
    before = human.read_text()
    capture = tmp_path / "more.jsonl"
    capture.write_text(jsonl([flow_dict(tcp=9999), flow_dict(dst=None, tcp=1)]))
    again = cpg("replay", str(capture), "-d", str(out), "--no-evidence", "--kustomize")
    assert again.returncode == 0, again.stderr
    assert "kubectl apply -k" in again.stdout
    built = set(_kustomize_build(out))
    assert human in built and human.read_text() == before, "the human's entry and file stay"
    assert out / "shop" / "notes.yaml" not in built
    assert {
        p
        for p in out.rglob("*.yaml")
        if p.name not in ("kustomization.yaml", "allow-probes.yaml", "notes.yaml")
    } <= built


def test_a_kustomization_a_person_broke_is_named_and_left_alone(tmp_path: Path) -> None:
    from conftest import cpg

    out = tmp_path / "policies"
    assert cpg("replay", str(EXAMPLE), "-d", str(out), "--no-evidence").returncode == 0
    broken = out / "shop" / "kustomization.yaml"
    broken.write_text("resources: 5\n")
    ran = cpg("replay", str(EXAMPLE), "-d", str(out), "--no-evidence", "--kustomize")
    assert ran.returncode == 1 and "Traceback" not in ran.stderr
    assert f"{broken}: resources must be a list" in ran.stderr
    assert broken.read_text() == "resources: 5\n"


@pytest.mark.skipif(GIT is None, reason="git is not installed")
def test_any_evidence_folder_in_the_work_tree_travels_and_names_paths_as_given(
    tmp_path: Path,
) -> None:
    """An evidence folder not named .cpg-evidence, inside the repository: keyed by the
    policies' path in the work tree, so a clone elsewhere finds it. Sessions record the
    capture as the user named it (relative), or by its file name alone when redacted."""
    assert GIT is not None
    author = tmp_path / "author"
    (author / "captures").mkdir(parents=True)
    shutil.copy(EXAMPLE, author / "captures" / "drops.jsonl")
    subprocess.run([GIT, "init", "-q", str(author)], check=True)
    cache = tmp_path / "cache"
    made = run(
        "replay",
        "captures/drops.jsonl",
        "-d",
        "k8s/policies",
        "--evidence-dir",
        "audit",
        cwd=author,
        cache=cache,
    )
    assert made.returncode == 0, made.stderr
    evidence = author / "audit" / "k8s" / "policies" / "shop" / "cart.json"
    assert evidence.is_file(), sorted(p.name for p in (author / "audit").iterdir())
    doc = json.loads(evidence.read_text())
    (session,) = doc["sessions"]
    assert session["source"]["file"] == "captures/drops.jsonl"
    assert [i["name"] for i in session["inputs"]] == ["captures/drops.jsonl"]
    assert str(tmp_path) not in evidence.read_text()
    subprocess.run([GIT, "-C", str(author), "add", "-A"], check=True)
    subprocess.run(
        [GIT, "-C", str(author), "-c", "user.name=a", "-c", "user.email=a@e", "commit", "-qm", "p"],
        check=True,
    )
    clone = tmp_path / "elsewhere" / "clone"
    subprocess.run([GIT, "clone", "-q", str(author), str(clone)], check=True)
    explained = run(
        "explain",
        "shop/cart",
        "-d",
        "k8s/policies",
        "--evidence-dir",
        "audit",
        cwd=clone,
        cache=tmp_path / "other-cache",
    )
    assert explained.returncode == 0, explained.stderr
    assert "frontend" in explained.stdout
    redacted = run(
        "replay",
        "captures/drops.jsonl",
        "-d",
        "red",
        "--evidence-dir",
        "audit",
        "--evidence-redact",
        cwd=author,
        cache=cache,
    )
    assert redacted.returncode == 0, redacted.stderr
    red = json.loads((author / "audit" / "red" / "shop" / "cart.json").read_text())
    assert red["sessions"][0]["source"]["file"] == "drops.jsonl"
    assert [i["name"] for i in red["sessions"][0]["inputs"]] == ["drops.jsonl"]
