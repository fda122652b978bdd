"""``cpg propose``: a run's output (policies and evidence, e.g. the in-cluster volume) as a
reviewable change in a Git repository — a branch named after the run, one commit, a push,
the pull-request body (the review report, with the plan when a capture is given) and, with
GitHub, the pull request itself. It never pushes to the base or default branch, never removes
a rule someone added in the repository, and a run with no change pushes nothing (ARCHITECTURE
§D29)."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from cpg_core import CheckRequest, CpgError, PolicyEvidence, Setting
from cpg_core.cilium import SECTIONS, foreign_policy, load_one
from cpg_core.readiness import ReadinessRules
from cpg_core.reports import MergeSafety, MergeWait, Review, is_shared_name, merge_safety, render
from cpg_io.errors import IoError
from cpg_io.evidence_store import REPO_EVIDENCE, EvidenceStore, default_evidence_root
from cpg_io.policy_files import MAX_FILE_BYTES, load_policies_and_files
from cpg_io.runs._plan import plan_run
from cpg_io.runs._report import read_review
from cpg_io.runs._session import utc_now
from cpg_io.store import RefusedFile, atomic_write_text, read_bounded

GITHUB_API = "https://api.github.com"
TOKEN_VARIABLES = ("GITHUB_TOKEN", "GH_TOKEN")


class ProposeError(IoError):
    """A proposal cannot be made; the message says what to fix (never a token)."""


@attrs.frozen(kw_only=True)
class ProposeRequest:
    source: Path
    """The run's output folder (policies, with their evidence)."""
    evidence_dir: Path | None = None
    worktree: Path | None = None
    """A Git work tree of the repository (a temporary worktree of it is used: the checkout
    is left alone)."""
    repo: str | None = None
    """Or a repository URL to clone."""
    path: str = "policies"
    """Where the policies live inside the repository."""
    branch: str | None = None
    base: str | None = None
    remote: str = "origin"
    capture: str | None = None
    """A capture with every verdict: the body gets the plan of the proposed policies."""
    body_file: Path | None = None
    github: str | None = None
    """OWNER/REPO: open or update the pull request through GitHub's REST API."""
    github_api: str = GITHUB_API
    push: bool = True
    readiness: ReadinessRules = attrs.Factory(ReadinessRules)
    """When a workload is ready to enforce: the body and the result say which workloads the
    pull request is safe to merge for (§D59)."""


@attrs.define
class ProposedFile:
    path: str
    status: str
    """``new``, ``changed`` or ``kept`` (a rule was added in the repository: not replaced)."""
    note: str = ""


@attrs.define
class ProposeResult:
    branch: str
    base: str
    changed: bool = False
    commit: str = ""
    pushed: bool = False
    files: list[ProposedFile] = attrs.Factory(list)
    body_file: str = ""
    pull_request: str = ""
    """The pull request's URL (with --github)."""
    safe_to_merge: list[str] = attrs.Factory(list)
    """The proposed workloads the pull request is safe to merge for."""
    not_yet: list[MergeWait] = attrs.Factory(list)
    """The others, each with why."""
    checked: bool = False
    """Whether a capture with every verdict was judged for what would break (--capture)."""


def _git(cwd: Path, *args: str, check: bool = True) -> str:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    ran = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env)
    if check and ran.returncode != 0:
        raise ProposeError(f"git {args[0]} failed: {(ran.stderr or ran.stdout).strip()}")
    return ran.stdout.strip()


def _token(request: ProposeRequest) -> str:
    if request.github is None:
        return ""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", request.github):
        raise ProposeError(Setting("github"), f" {request.github!r} is not OWNER/REPO")
    for name in TOKEN_VARIABLES:
        if os.environ.get(name):
            return os.environ[name]
    raise ProposeError(
        Setting("github"),
        " needs a token in GITHUB_TOKEN or GH_TOKEN (contents: write and "
        "pull-requests: write on the repository)",
    )


def _run_name(source: Path, store: EvidenceStore) -> str:
    """The newest evidence session of the run, else the time: the branch's name."""
    newest = ""
    for _namespace, _workload, doc in store.read_all(lambda _problem: None):
        for session in doc.sessions:
            newest = max(newest, session.id)
    name = newest or f"propose-{utc_now():%Y%m%dT%H%M%SZ}"
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")


def _rules(document: Any) -> dict[str, list[str]]:
    spec = document.get("spec") if isinstance(document, Mapping) else None
    found: dict[str, list[str]] = {}
    for direction in SECTIONS:
        rules = spec.get(direction) if isinstance(spec, Mapping) else None
        if isinstance(rules, list):
            found[direction] = [json.dumps(rule, sort_keys=True) for rule in rules]
    return found


def _added_by_hand(repo_text: str, source_text: str) -> bool:
    """Whether the repository's file has a rule the run's file lacks (someone added it)."""
    try:
        mine, theirs = load_one(repo_text, "repository"), load_one(source_text, "run")
    except CpgError:  # unreadable, bounded or several documents: never overwrite it
        return True
    proposed = _rules(theirs)
    return any(
        rule not in proposed.get(direction, [])
        for direction, rules in _rules(mine).items()
        for rule in rules
    )


def _no_link_on_the_way(root: Path, path: Path) -> None:
    """ProposeError when a folder or file on the way from ``root`` to ``path`` is a symlink:
    a repository's link would make cpg write outside its clone."""
    here = root
    for part in path.relative_to(root).parts:
        here = here / part
        if here.is_symlink():
            shown = here.relative_to(root).as_posix()
            raise ProposeError(
                f"{shown}: the repository holds a symlink there; cpg does not write through "
                "it (make it a plain folder or file, or choose another ",
                Setting("path"),
                ")",
            )


def _read_text(path: Path, inside: Path) -> str:
    """A file of the run or of the clone, bounded and inside its folder."""
    try:
        return read_bounded(path, MAX_FILE_BYTES, inside).decode("utf-8")
    except (RefusedFile, OSError, UnicodeDecodeError) as exc:
        raise ProposeError(f"{path}: cannot read it ({exc})") from None


def _copy_policies(source: Path, target: Path, clone: Path) -> list[ProposedFile]:
    files = []
    for path in sorted([*source.rglob("*.yaml"), *source.rglob("*.yml")]):
        relative = path.relative_to(source)
        if any(part.startswith(".") for part in relative.parts):
            continue
        text = _read_text(path, source)
        destination = target / relative
        _no_link_on_the_way(clone, destination)
        shown = relative.as_posix()
        if destination.exists():
            existing = _read_text(destination, clone)
            if existing == text:
                continue
            foreign = foreign_policy(existing, shown)
            if foreign is not None:  # a person's policy: never replaced (§D48)
                note = f"the repository's file is your policy ({foreign.describe()}): kept"
                files.append(ProposedFile(shown, "kept", note))
                continue
            if _added_by_hand(existing, text):
                note = "the repository's file has rules the run's lacks: kept; merge by hand"
                files.append(ProposedFile(shown, "kept", note))
                continue
            files.append(ProposedFile(shown, "changed"))
        else:
            files.append(ProposedFile(shown, "new"))
        atomic_write_text(destination, text)
    return files


def _copy_evidence(
    store: EvidenceStore, clone: Path, policies: Path, files: list[ProposedFile]
) -> None:
    """The evidence of each proposed policy, in the repository's ``.cpg-evidence`` layout."""
    target = EvidenceStore(clone / REPO_EVIDENCE, policies)
    for item in files:
        if item.status == "kept":
            continue
        namespace, _, name = item.path.rpartition("/")
        source = store.path_for(namespace, Path(name).stem) if namespace else None
        if source is not None and source.is_file():
            destination = target.path_for(namespace, Path(name).stem)
            _no_link_on_the_way(clone, destination)
            atomic_write_text(destination, _read_text(source, store.base))


def _message(files: list[ProposedFile], request: ProposeRequest, run: str) -> str:
    proposed = [f for f in files if f.status != "kept"]
    new = sum(1 for f in proposed if f.status == "new")
    title = f"cpg: {len(proposed)} policies ({new} new, {len(proposed) - new} changed)"
    lines = [title, ""]
    lines += [f"{f.status:<8} {f.path}" for f in proposed]
    lines += ["", f"From {request.source}, run {run}. Review before applying; cpg applies nothing."]
    return "\n".join(lines) + "\n"


def _body(
    clone: Path, policies: Path, request: ProposeRequest, work: Path, files: list[ProposedFile]
) -> tuple[str, MergeSafety]:
    """The pull request's body (which workloads it is safe to merge for, then the review
    report, with the plan when a capture is given) and that verdict."""
    plan_file = None
    planned = None
    if request.capture:
        check = CheckRequest.build(inputs=[request.capture], policies=str(policies))
        check = attrs.evolve(check, readiness=request.readiness)
        planned = plan_run(check, evidence=EvidenceStore(clone / REPO_EVIDENCE, policies))
        plan_file = work / "plan.json"
        plan_file.write_text(render(planned.view, "json"))
    store = EvidenceStore(clone / REPO_EVIDENCE, policies)
    inputs = attrs.evolve(read_review(policies, store, plan_file), readiness=request.readiness)
    safety = merge_safety(
        _proposed_workloads(policies, files, inputs.evidence),
        inputs.profiles(),
        planned.view.plan if planned is not None else None,
    )
    report = render(Review(title=f"cpg proposal: {request.path}", inputs=inputs), "markdown")
    title, _, rest = report.partition("\n")
    return "\n".join([title, "", *safety.markdown()]) + rest, safety


def _proposed_workloads(
    policies: Path, files: list[ProposedFile], evidence: Mapping[str, PolicyEvidence]
) -> list[str]:
    """The workloads whose own policies the proposal adds or changes (a shared policy's
    members are judged as their own files are)."""
    proposed = {(policies / f.path).resolve() for f in files if f.status != "kept"}
    _docs, where = load_policies_and_files(policies)
    found = set()
    for key, path in where.items():
        namespace, _, name = key.rpartition("/")
        if Path(path).resolve() not in proposed or not namespace or is_shared_name(name):
            continue
        doc = evidence.get(key)
        found.add(f"{namespace}/{doc.policy.workload if doc else name.removeprefix('cpg-')}")
    return sorted(found)


def _github(
    request: ProposeRequest, token: str, branch: str, base: str, title: str, body: str
) -> str:
    """Open the pull request, or update the one already open for ``branch``; its URL."""
    assert request.github is not None
    owner = request.github.split("/", 1)[0]
    api = request.github_api.rstrip("/")
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": "2022-11-28",
        "User-Agent": "cpg",
    }

    opener = urllib.request.build_opener(_RefuseRedirects)

    def call(method: str, url: str, payload: dict[str, Any] | None = None) -> Any:
        data = json.dumps(payload).encode() if payload is not None else None
        sent = urllib.request.Request(url, data=data, method=method, headers=headers)
        if data is not None:
            sent.add_header("Content-Type", "application/json")
        try:
            with opener.open(sent, timeout=30) as answer:
                return json.loads(answer.read() or b"null")
        except urllib.error.HTTPError as exc:
            if 300 <= exc.code < 400:
                target = exc.headers.get("Location", "") if exc.headers else ""
                raise ProposeError(
                    f"GitHub's API at {api} answered {exc.code}, a redirect to {target!r}: cpg "
                    "sends its token to the address it was given only; give ",
                    Setting("github_api"),
                    " the API's own address",
                ) from None
            detail = ""
            with contextlib.suppress(ValueError, AttributeError):
                detail = json.loads(exc.read()).get("message", "")
            raise ProposeError(
                f"GitHub answered {exc.code} to {method} {urllib.parse.urlsplit(url).path}"
                f"{': ' + detail if detail else ''}"
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ProposeError(f"cannot reach GitHub's API at {api}: {reason}") from None

    query = urllib.parse.urlencode({"head": f"{owner}:{branch}", "state": "open"})
    pulls = f"{api}/repos/{request.github}/pulls"
    found = call("GET", f"{pulls}?{query}") or []
    if found:
        updated = call("PATCH", f"{pulls}/{found[0]['number']}", {"title": title, "body": body})
        return str(updated.get("html_url", ""))
    created = call("POST", pulls, {"title": title, "head": branch, "base": base, "body": body})
    return str(created.get("html_url", ""))


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """No redirect is followed: urllib would resend the Authorization header to wherever a
    redirect points (another host, plain http)."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _check_api(api: str) -> None:
    """The API address the token may go to: https, or plain http to this machine only."""
    if not api.startswith(("https://", "http://")):
        raise ProposeError(Setting("github_api"), f" {api!r} is not an http(s) URL")
    if api.startswith("http://") and not _loopback(urllib.parse.urlsplit(api).hostname or ""):
        raise ProposeError(
            Setting("github_api"),
            f" {api!r} is plain http: the token would cross the network in the clear; use "
            "https (plain http only to this machine's own address, for a local test server)",
        )


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _prepare(request: ProposeRequest, work: Path) -> tuple[Path, Path]:
    """(the repository to push from, a fresh checkout of the base to change)."""
    if request.repo is not None:
        repository = work / "repository"
        # a path on disk, as given from here (git clones from its temporary folder)
        source = str(Path(request.repo).resolve()) if Path(request.repo).exists() else request.repo
        _git(work, "clone", "--quiet", "--", source, str(repository))
    elif request.worktree is not None:
        repository = request.worktree.resolve()
        if not (repository / ".git").exists():
            raise ProposeError(Setting("worktree"), f" {request.worktree}: not a Git work tree")
        _git(repository, "fetch", "--quiet", request.remote)
    else:
        raise ProposeError(
            "give ",
            Setting("worktree"),
            " DIR or ",
            Setting("repo"),
            " URL: where to propose the change",
        )
    return repository, work / "checkout"


def _default_branch(repository: Path, remote: str, base: str | None = None) -> str:
    """The remote's default branch: its HEAD, else (a HEAD that names no branch there, as in
    a bare repository made with another default branch) the base given, else its only
    branch."""
    head = _git(repository, "symbolic-ref", "--short", f"refs/remotes/{remote}/HEAD", check=False)
    branches: set[str] = set(
        re.findall(
            r"refs/heads/(\S+)", _git(repository, "ls-remote", "--heads", remote, check=False)
        )
    )
    if head.startswith(f"{remote}/") and head.removeprefix(f"{remote}/") in branches:
        return head.removeprefix(f"{remote}/")
    remote_head = _git(repository, "ls-remote", "--symref", remote, "HEAD", check=False)
    match = re.search(r"ref: refs/heads/(\S+)\s+HEAD", remote_head)
    if match and match.group(1) in branches:
        return match.group(1)
    if base:
        if base not in branches:
            raise ProposeError(
                Setting("base"),
                f" {base}: {remote} has no such branch"
                + (f" (it has {', '.join(sorted(branches))})" if branches else ""),
            )
        return base
    if len(branches) == 1:
        (only,) = branches
        return str(only)
    shown = f" (it has {', '.join(sorted(branches))})" if branches else ""
    raise ProposeError(f"cannot tell the default branch of {remote}{shown}; give ", Setting("base"))


def propose(request: ProposeRequest) -> ProposeResult:
    """Propose the run's policies as a branch, a commit, a push and a pull-request body."""
    token = _token(request)  # a missing token fails before anything is cloned or pushed
    if request.github is not None:
        _check_api(request.github_api.rstrip("/"))  # and an address it must not go to
    if not request.source.is_dir():
        raise ProposeError(f"{request.source}: not a folder of policies (the run's -d)")
    store = EvidenceStore(
        request.evidence_dir or default_evidence_root(request.source), request.source
    )
    work = Path(tempfile.mkdtemp(prefix="cpg-propose-"))
    repository: Path | None = None
    checkout: Path | None = None
    try:
        repository, checkout = _prepare(request, work)
        default = _default_branch(repository, request.remote, request.base)
        base = request.base or default
        run = _run_name(request.source, store)
        branch = request.branch or f"cpg/{run}"
        if _git(repository, "check-ref-format", "--branch", branch, check=False) != branch:
            raise ProposeError(f"{branch!r} is not a valid branch name")
        if branch in (base, default):
            raise ProposeError(f"{branch!r} is the base or default branch: cpg never pushes there")
        _git(
            repository,
            "worktree",
            "add",
            "--quiet",
            "--detach",
            str(checkout),
            f"{request.remote}/{base}",
        )
        result = ProposeResult(branch=branch, base=base)
        policies = checkout / request.path
        result.files = _copy_policies(request.source, policies, checkout)
        _copy_evidence(store, checkout, policies, result.files)
        staged = [request.path] + ([REPO_EVIDENCE] if (checkout / REPO_EVIDENCE).exists() else [])
        _git(checkout, "add", "-A", "--", *staged)
        if not _git(checkout, "diff", "--cached", "--name-only"):
            return result  # no change: nothing committed, pushed or opened
        result.changed = True
        message = _message(result.files, request, run)
        identity = (
            []
            if _git(checkout, "config", "user.email", check=False)
            else ["-c", "user.name=cpg", "-c", "user.email=cpg@localhost"]
        )
        _git(checkout, *identity, "commit", "--quiet", "-m", message)
        result.commit = _git(checkout, "rev-parse", "HEAD")
        body, safety = _body(checkout, policies, request, work, result.files)
        result.safe_to_merge = list(safety.safe)
        result.not_yet = list(safety.waiting)
        result.checked = safety.checked
        if request.body_file is not None:
            atomic_write_text(request.body_file, body)
            result.body_file = str(request.body_file)
        if request.push:
            # the branch is cpg's own: each proposal of the run replaces it
            _git(
                checkout, "push", "--quiet", "--force", request.remote, f"HEAD:refs/heads/{branch}"
            )
            result.pushed = True
            if request.github is not None:
                title = message.splitlines()[0]
                result.pull_request = _github(request, token, branch, base, title, body)
        return result
    finally:
        if repository is not None and checkout is not None and checkout.exists():
            _git(repository, "worktree", "remove", "--force", str(checkout), check=False)
        shutil.rmtree(work, ignore_errors=True)
