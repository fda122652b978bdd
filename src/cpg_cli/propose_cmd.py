"""``cpg propose``: a run's policies and evidence as a branch and a pull request."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import attrs
import typer

from cpg_cli import options as opt
from cpg_cli.terminal import fail, say
from cpg_core import CpgError
from cpg_io import runs

_Source = Annotated[
    Path | None,
    typer.Argument(
        metavar="[DIR]",
        help="The run's output folder, as -d gives it (kept for scripts that pass it here).",
        show_default=False,
    ),
]
_OutputDir = Annotated[
    Path | None,
    opt.policy_folder(
        "The run's output folder (the -d of replay or generate; its evidence is found as "
        "replay finds it, or give --evidence-dir).",
        show_default=False,
    ),
]


def _option(*names: str, metavar: str, help: str) -> object:
    return typer.Option(*names, metavar=metavar, help=help, show_default=False)


_Worktree = Annotated[
    Path | None,
    _option(
        "--worktree",
        metavar="DIR",
        help="A Git work tree of the repository to propose in (a temporary worktree is used: "
        "your checkout is left alone).",
    ),
]
_Repo = Annotated[
    str | None,
    _option("--repo", metavar="URL", help="Or a repository to clone (any URL git clones)."),
]
_Path = Annotated[
    str, typer.Option("--path", metavar="DIR", help="Where the policies live in the repository.")
]
_Branch = Annotated[
    str | None,
    _option(
        "--branch",
        metavar="NAME",
        help="The branch (default cpg/<the run's session>); never the base or default branch.",
    ),
]
_Base = Annotated[
    str | None,
    _option(
        "--base",
        metavar="BRANCH",
        help="The branch to propose against (default: the remote's default branch).",
    ),
]
_Remote = Annotated[str, typer.Option("--remote", metavar="NAME", help="The remote to push to.")]
_Capture = Annotated[
    str | None,
    _option(
        "--capture",
        metavar="FILE",
        help="A capture with every verdict: the body gets the plan of the proposed policies "
        "(what would break).",
    ),
]
_BodyFile = Annotated[
    Path | None,
    _option(
        "--body-file",
        metavar="FILE",
        help="Write the pull-request body (the review report, with the plan) to FILE.",
    ),
]
_GitHub = Annotated[
    str | None,
    _option(
        "--github",
        metavar="OWNER/REPO",
        help="Open or update the pull request through GitHub's REST API (token from "
        "GITHUB_TOKEN or GH_TOKEN).",
    ),
]
_GitHubApi = Annotated[
    str | None,
    typer.Option(
        "--github-api",
        metavar="URL",
        help="GitHub's API (default https://api.github.com; GitHub Enterprise: "
        "https://HOST/api/v3).",
        show_default=False,
    ),
]
_NoPush = Annotated[
    bool,
    typer.Option(
        "--no-push", help="Commit in a throwaway checkout and write the body; push nothing."
    ),
]


@opt.with_options("propose")
def propose(
    options: opt.Values,
    source: _Source = None,
    output_dir: _OutputDir = None,
    worktree: _Worktree = None,
    repo: _Repo = None,
    path: _Path = "policies",
    branch: _Branch = None,
    base: _Base = None,
    remote: _Remote = "origin",
    capture: _Capture = None,
    body_file: _BodyFile = None,
    github: _GitHub = None,
    github_api: _GitHubApi = None,
    no_push: _NoPush = False,
    evidence_dir: opt.EvidenceDir = None,
    output: Annotated[str, opt.output_option("text", "json", help="text, json or yaml.")] = "text",
) -> None:
    """Propose a run's policies as a pull request: branch, commit, push, body.

    Copies the run's policy files into the repository's --path and their evidence into its
    .cpg-evidence layout, on a branch named after the run, commits with a summary, pushes
    the branch (never the base or default branch), and writes the pull-request body. A file
    someone added rules to in the repository is kept, and named. With --github the pull
    request is opened, or updated when one is open for the branch. No change: nothing is
    committed or pushed.

    It says which workloads the pull request is safe to merge for: ready to enforce by their
    evidence (the Readiness thresholds) and, with --capture, nothing that works today would
    break for them; the others are named with why, at the top of the body too.

    Exit codes: 0 proposed (or nothing to propose), 1 git or GitHub failed, 2 bad flags.
    """
    if (worktree is None) == (repo is None):
        raise typer.BadParameter("give --worktree DIR or --repo URL (one)", param_hint="--worktree")
    if source is not None and output_dir is not None and source != output_dir:
        raise typer.BadParameter(
            f"two folders: {source} and -d {output_dir}; give the run's folder once",
            param_hint="-d",
        )
    folder = output_dir or source
    if folder is None:
        raise typer.BadParameter("give the run's output folder: -d DIR", param_hint="-d")
    from cpg_core.readiness import readiness_rules

    readiness = opt.validated(lambda: readiness_rules(options.check))
    request = runs.ProposeRequest(
        source=folder,
        evidence_dir=evidence_dir,
        worktree=worktree,
        repo=repo,
        path=path,
        branch=branch,
        base=base,
        remote=remote,
        capture=capture,
        body_file=body_file,
        github=github,
        **({"github_api": github_api} if github_api else {}),
        push=not no_push,
        readiness=readiness,
    )
    try:
        result = runs.propose(request)
    except CpgError as exc:
        fail(exc)
    if output == "json":
        typer.echo(json.dumps(attrs.asdict(result), indent=2))
    elif output == "yaml":
        import yaml

        typer.echo(yaml.safe_dump(attrs.asdict(result), sort_keys=False), nl=False)
    else:
        _say_result(result, path)


def _say_result(result: runs.ProposeResult, path: str) -> None:
    if not result.changed:
        say(f"Nothing to propose: {path} on {result.base} already holds the run's policies.")
        for item in result.files:
            say(f"  {item.status:<8} {item.path}: {item.note}")
        return
    if result.pushed:
        say(
            f"Proposed on branch {result.branch} (against {result.base}), commit "
            f"{result.commit[:12]}:"
        )
    else:
        say(
            f"Would propose on branch {result.branch} (against {result.base}); --no-push: the "
            "commit was made in a throwaway checkout and is not kept, no branch was made:"
        )
    for item in result.files:
        say(f"  {item.status:<8} {item.path}" + (f": {item.note}" if item.note else ""))
    if result.pushed:
        say("  pushed")
    if result.safe_to_merge or result.not_yet:
        from cpg_core.reports import MergeSafety

        safety = MergeSafety(
            tuple(result.safe_to_merge), tuple(result.not_yet), checked=result.checked
        )
        for line in safety.lines():
            say(line)
    if result.body_file:
        say(f"Pull-request body: {result.body_file}")
    if result.pull_request:
        say(f"Pull request: {result.pull_request}")
