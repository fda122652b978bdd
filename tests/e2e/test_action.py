"""The GitHub Action (issue 30): action.yml's gate step run as the runner runs it — its env
mapping of the inputs evaluated, bash, a fake GITHUB_* environment — with each input's effect
on the step summary, the outputs and the exit status."""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import yaml

from captures import ingress_capture
from conftest import EXAMPLE, cpg

ROOT = Path(__file__).resolve().parents[2]
ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
_EXPRESSION = re.compile(r"\$\{\{\s*([^}]+?)\s*\}\}")


def _step(step_id: str) -> dict[str, Any]:
    return next(s for s in ACTION["runs"]["steps"] if s.get("id") == step_id)


def _evaluate(text: str, inputs: dict[str, str]) -> str:
    """The ``${{ inputs.X }}`` and ``${{ github.action_path }}`` expressions the gate uses."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name == "github.action_path":
            return str(ROOT)
        assert name.startswith("inputs."), name
        return inputs[name.removeprefix("inputs.")]

    return _EXPRESSION.sub(value, text)


def run_gate(
    workspace: Path, *, fake_bin: Path | None = None, **given: str
) -> tuple[int, str, dict[str, str], str]:
    """Run the gate step (``fake_bin`` first on PATH); (exit status, step summary, outputs,
    stderr)."""
    inputs = {name: str(spec.get("default", "")) for name, spec in ACTION["inputs"].items()}
    inputs.update({name.replace("_", "-"): value for name, value in given.items()})
    step = _step("gate")
    env = {name: _evaluate(str(value), inputs) for name, value in step["env"].items()}
    summary, outputs = workspace / "summary.md", workspace / "outputs.txt"
    summary.write_text("")
    outputs.write_text("")
    env.update(
        PATH=":".join(
            [
                *([str(fake_bin)] if fake_bin else []),
                str(Path(sys.executable).parent),
                os.environ["PATH"],
            ]
        ),
        HOME=str(workspace),
        GITHUB_STEP_SUMMARY=str(summary),
        GITHUB_OUTPUT=str(outputs),
        GITHUB_WORKSPACE=str(workspace),
        RUNNER_TEMP=str(workspace / "runner-temp"),
        XDG_CACHE_HOME=os.environ["XDG_CACHE_HOME"],
    )
    (workspace / "runner-temp").mkdir(exist_ok=True)
    ran = subprocess.run(
        [step["shell"], "-c", step["run"]],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return ran.returncode, summary.read_text(), _outputs(outputs.read_text()), ran.stderr


def _outputs(text: str) -> dict[str, str]:
    """GITHUB_OUTPUT's format: name=value lines and name<<DELIMITER blocks."""
    found: dict[str, str] = {}
    lines = iter(text.splitlines())
    for line in lines:
        if "<<" in line and "=" not in line.split("<<", 1)[0]:
            name, delimiter = line.split("<<", 1)
            block = []
            for inner in lines:
                if inner == delimiter:
                    break
                block.append(inner)
            found[name] = "\n".join(block)
        else:
            name, _, value = line.partition("=")
            found[name] = value
    return found


def _workspace(tmp_path: Path) -> Path:
    workspace = tmp_path / "repo"
    workspace.mkdir()
    ran = cpg("replay", str(EXAMPLE), "-d", str(workspace / "policies"))
    assert ran.returncode == 0, ran.stderr
    shutil.copy(EXAMPLE, workspace / "drops.jsonl")
    return workspace


def test_the_action_declares_what_the_gate_reads() -> None:
    assert ACTION["runs"]["using"] == "composite"
    gate = _step("gate")
    for name in gate["env"]:  # inputs reach the script as data, never as code
        assert name.startswith(("CPG_", "ACTION_")), name
    assert "${{" not in gate["run"], "no expression is spliced into the script"
    for output in ACTION["outputs"].values():
        assert output["value"].startswith("${{ steps.gate.outputs.")


def test_clean_policies_pass_and_the_report_reaches_the_summary_and_outputs(
    tmp_path: Path,
) -> None:
    workspace = _workspace(tmp_path)
    code, summary, outputs, stderr = run_gate(workspace, capture="drops.jsonl")
    assert code == 0, stderr
    assert "**cpg lint**: no findings." in summary
    assert "**cpg plan**: `nothing_breaks` (0 flow(s) would break)." in summary
    assert "cpg-cart" in summary and "<details><summary>cpg verify: " in summary
    assert outputs["lint-findings"] == "0" and outputs["verdict"] == "nothing_breaks"
    assert outputs["report"] == Path(outputs["report-file"]).read_text().rstrip("\n")
    assert Path(outputs["sarif"]).is_file()


def test_lint_findings_fail_the_job_unless_relaxed(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)
    bad = workspace / "policies" / "shop" / "not-a-policy-open.yaml"
    bad.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "cilium.io/v2",
                "kind": "CiliumNetworkPolicy",
                "metadata": {"name": "open", "namespace": "shop"},
                "spec": {"endpointSelector": {}, "egress": [{"toEntities": ["world"]}]},
            }
        )
    )
    code, summary, outputs, stderr = run_gate(workspace)
    assert code == 1 and "cpg lint: 2 finding(s)" in stderr
    assert "CPG004 empty-endpoint-selector" in summary and "CPG006 open-to-world" in summary
    assert outputs["lint-findings"] == "2" and outputs["verdict"] == "no-capture"
    relaxed, _summary, _outputs, stderr = run_gate(workspace, fail_on_lint="false")
    assert relaxed == 0, stderr


def test_would_break_traffic_fails_the_job_unless_relaxed_and_a_url_capture(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "repo"
    workspace.mkdir()
    capture = ingress_capture(workspace / "all.jsonl", allowed_by=True)
    assert cpg("replay", str(capture), "-d", str(workspace / "policies")).returncode == 0
    code, summary, outputs, stderr = run_gate(workspace, capture="all.jsonl")
    assert code == 1 and "12 flow(s) that work today would break" in stderr
    assert outputs["verdict"] == "breaks" and outputs["would-break"] == "12"
    assert "**cpg plan**: `breaks` (12 flow(s) would break)." in summary
    assert "monitoring/prometheus" in outputs["report"]  # the report draws the plan
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(workspace))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/all.jsonl"
        relaxed, _summary, outputs, stderr = run_gate(workspace, capture=url, fail_on_break="false")
    finally:
        server.shutdown()
    assert relaxed == 0, stderr
    assert outputs["verdict"] == "breaks"


def test_a_file_named_like_an_option_is_linted_and_names_cannot_forge_commands(
    tmp_path: Path,
) -> None:
    """A pull request's root-level policy named ``--context=evil.yaml`` that opens every pod
    to the world is linted (a file, not the option), and a file whose name holds a newline
    and ``::error`` reaches the job log with workflow commands off."""
    workspace = _workspace(tmp_path)
    open_all = {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumNetworkPolicy",
        "metadata": {"name": "open", "namespace": "shop"},
        "spec": {"endpointSelector": {}, "ingress": [{"fromEntities": ["world"]}]},
    }
    (workspace / "--context=evil.yaml").write_text(yaml.safe_dump(open_all))
    code, summary, outputs, stderr = run_gate(workspace, lint_paths="--context=evil.yaml")
    assert code == 1, stderr
    assert outputs["lint-findings"] == "2" and "CPG006 open-to-world" in summary
    forged = workspace / "not-a-policy\n::error file=README.md::forged.yaml"
    forged.write_bytes(b"\xff\xfe not utf-8")
    code, _summary, _outputs, stderr = run_gate(workspace, lint_paths=str(forged.name))
    lines = stderr.splitlines()
    stop = next(n for n, line in enumerate(lines) if line.startswith("::stop-commands::"))
    assert lines[-1] == "::" + lines[stop].split("::")[2] + "::", "commands resume at exit"
    assert not any(line.startswith("::error") for line in lines), stderr


def test_at_500_workloads_the_comment_fits_and_the_whole_texts_are_artifacts(
    tmp_path: Path,
) -> None:
    """benchmarks/synthetic.py's 500 workloads: the report alone was 222,608 characters and
    the verify text 423 KB. The comment stays under GitHub's 65,536 with would-break before
    any graph, and says where the whole report is; the artifact folder holds it whole."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from synthetic import synthetic_capture

    workspace = tmp_path / "repo"
    workspace.mkdir()
    synthetic_capture(workspace / "capture.jsonl", 500)
    assert (
        cpg(
            "replay", "capture.jsonl", "-d", str(workspace / "policies"), "-q", cwd=workspace
        ).returncode
        == 0
    )
    code, summary, outputs, stderr = run_gate(
        workspace, capture="capture.jsonl", fail_on_break="false"
    )
    assert code == 0, stderr
    comment = outputs["report"]
    assert len(comment) <= 65_536, len(comment)
    graph = comment.find("```mermaid")
    assert comment.index("## Would break") < (graph if graph >= 0 else len(comment))
    assert "Full report: report-full.md in the artifact cpg-review." in comment
    # verify: its verdict, not 3,196 admitted lines
    assert "cpg verify: 3196/3196 candidate flows admitted" in comment
    assert "  admitted " not in comment
    artifacts = Path(outputs["artifacts"])
    whole = (artifacts / "report-full.md").read_text()
    assert len(whole) > 65_536 and "```mermaid" in whole
    assert (artifacts / "verify.txt").read_text().count("  admitted ") >= 3_000
    assert json.loads((artifacts / "plan.json").read_text())["would_break_flows"] > 0
    assert summary.startswith(comment)


def _open_policy() -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "cilium.io/v2",
            "kind": "CiliumNetworkPolicy",
            "metadata": {"name": "open", "namespace": "shop"},
            "spec": {"endpointSelector": {}, "ingress": [{"fromEntities": ["world"]}]},
        }
    )


def test_a_file_name_that_is_not_utf8_cannot_hide_a_world_open_policy(tmp_path: Path) -> None:
    """Issue 67: a name holding a byte that is not UTF-8 made lint's SARIF unreadable, the
    gate's count fell back to 0 and it passed a world-open policy. Names are escaped to valid
    UTF-8 in every output (SARIF: percent-encoded), so the findings are counted."""
    workspace = _workspace(tmp_path)
    (workspace / "policies" / "shop" / "open.yaml").write_text(_open_policy())
    odd = os.fsencode(workspace / "policies" / "shop") + b"/odd\xff.yaml"
    with open(odd, "w") as handle:
        handle.write(_open_policy())
    code, summary, outputs, stderr = run_gate(workspace)
    assert code == 1 and outputs["lint-findings"] == "4", stderr
    assert "no findings" not in summary and "odd\\xff.yaml" in summary
    sarif = json.loads(Path(outputs["sarif"]).read_bytes().decode("utf-8"))  # valid UTF-8
    uris = {
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        for r in sarif["runs"][0]["results"]
    }
    assert "policies/shop/odd%FF.yaml" in uris
    listed = cpg("lint", "-o", "json", str(workspace / "policies"))
    files = {f["file"] for f in json.loads(listed.stdout)["findings"]}
    assert any(f.endswith("odd\\xff.yaml") for f in files)


def test_output_the_gate_cannot_count_fails_the_job(tmp_path: Path) -> None:
    """Fail closed: a lint whose SARIF is not JSON, and a plan whose JSON is missing, fail
    the job with the reason, never "no findings" or "nothing breaks"."""
    workspace = _workspace(tmp_path)
    fake = tmp_path / "bin"
    fake.mkdir()
    real = shutil.which("cpg", path=str(Path(sys.executable).parent))
    (fake / "cpg").write_text(
        "#!/bin/sh\n"
        'case "$*" in\n'
        '  *"lint -o sarif"*) printf "\\377 not json"; exit 3 ;;\n'
        '  *"plan "*) exit 0 ;;\n'
        "esac\n"
        f'exec "{real}" "$@"\n'
    )
    (fake / "cpg").chmod(0o755)
    code, summary, outputs, stderr = run_gate(workspace, fake_bin=fake, capture="drops.jsonl")
    assert code == 1
    assert "cpg lint's SARIF could not be counted (exit 3)" in stderr
    assert "its output could not be read or counted" in summary
    assert "**cpg lint**: no findings." not in summary
    assert "cpg plan's JSON could not be read (exit 0)" in stderr
    assert outputs["verdict"] == "unreadable"
