"""kubectl and hubble habits on every command: -h, -o is a format (JSON parses), -d is the
policy folder, a folder given to -o is a usage error with the hint, and a version."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import EXAMPLE, cpg


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("conventions")
    out, evidence = root / "policies", root / "evidence"
    ran = cpg("replay", str(EXAMPLE), "-d", str(out), "--evidence-dir", str(evidence))
    assert ran.returncode == 0, ran.stderr
    return out, evidence


def _commands(out: Path, evidence: Path) -> dict[str, list[str]]:
    """Each command with the arguments it needs, reading or writing the folder given by -d."""
    return {
        "replay": ["replay", str(EXAMPLE), "-d", str(out), "--evidence-dir", str(evidence)],
        "explain": ["explain", "shop/cart", "-d", str(out), "--evidence-dir", str(evidence)],
        "verify": ["verify", str(EXAMPLE), "-d", str(out)],
        "bootstrap": ["bootstrap", "-n", "shop"],
        "version": ["version"],
        "plan": ["plan", str(EXAMPLE), "-d", str(out), "--evidence-dir", str(evidence)],
    }


@pytest.mark.parametrize("command", ["replay", "explain", "verify", "bootstrap", "version", "plan"])
def test_every_command_follows_the_conventions(replayed: tuple[Path, Path], command: str) -> None:
    out, evidence = replayed
    args = _commands(out, evidence)[command]
    helped = cpg(command, "-h")
    assert helped.returncode == 0 and "Usage: " in helped.stdout
    as_json = cpg(*args, "-o", "json")
    assert as_json.returncode in (0, 3), as_json.stderr
    json.loads(as_json.stdout)
    folder = cpg(*args, "-o", str(out))
    assert folder.returncode == 2
    assert "-o is the output format" in folder.stderr and "-d DIR" in folder.stderr


@pytest.mark.parametrize("command", ["generate"])
def test_generate_takes_the_same_flags(command: str) -> None:
    helped = cpg(command, "-h")
    assert helped.returncode == 0
    for flag in ("-d, --output-dir", "-o, --output", "CPG_OUTPUT_DIR"):
        assert flag in helped.stdout
    assert cpg(command, "--server", "127.0.0.1:9", "-o", "policies").returncode == 2


def test_the_folder_comes_from_the_environment(
    replayed: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    out, evidence = replayed
    monkeypatch.setenv("CPG_OUTPUT_DIR", str(out))
    monkeypatch.setenv("CPG_EVIDENCE_DIR", str(evidence))
    explained = cpg("explain", "shop/cart", "-o", "json")
    assert explained.returncode == 0, explained.stderr
    assert json.loads(explained.stdout)["policy"]["workload"] == "cart"


def test_version_both_ways() -> None:
    flag = cpg("--version")
    assert flag.returncode == 0 and flag.stdout.startswith("cpg ")
    command = cpg("version", "-o", "json")
    versions = json.loads(command.stdout)
    assert set(versions) >= {"cpg", "python", "grpcio", "protobuf", "mcp"}
    assert flag.stdout.split()[1] == versions["cpg"]


def test_readable_placeholders_missing_and_repeated_options() -> None:
    for command in ("replay", "generate", "explain", "verify", "bootstrap", "version"):
        helped = cpg(command, "-h").stdout
        options = [line for line in helped.splitlines() if line.strip().startswith("-")]
        assert not [line for line in options if "<" in line.split("  ")[0]], (command, helped)
    missing = cpg("bootstrap")
    assert missing.returncode == 2 and "Missing option '-n'" in missing.stderr
    twice = cpg("bootstrap", "-n", "a", "-n", "b")
    assert (
        twice.returncode == 2 and "given twice" in twice.stderr and "apiVersion" not in twice.stdout
    )
    repeatable = cpg("replay", str(EXAMPLE), "-n", "shop", "-n", "payments", "--dry-run")
    assert repeatable.returncode == 0, repeatable.stderr


def test_hubbles_flag_spellings_and_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    helped = cpg("generate", "-h").stdout
    for spelling in (
        "--tls-ca-cert-files",
        "--tls-client-cert-file",
        "--tls-client-key-file",
        "--kube-context",
        "HUBBLE_SERVER",
        "HUBBLE_TLS_CA_CERT_FILES",
    ):
        assert spelling in helped
    monkeypatch.setenv("HUBBLE_SERVER", "127.0.0.1:9")
    from_env = cpg("generate", "-d", str(tmp_path / "p"))
    assert from_env.returncode == 1 and "connection refused by 127.0.0.1:9" in from_env.stderr
    flag_wins = cpg("generate", "--server", "no-such-host.invalid:1", "-d", str(tmp_path / "p"))
    assert "cannot resolve 'no-such-host.invalid'" in flag_wins.stderr


def _complete(shell: str, words: str, cword: int, cwd: Path) -> str:
    import os
    import subprocess

    from conftest import CPG

    env = {  # what each shell's script hands to cpg (bash: COMP_*, the others one string)
        **os.environ,
        "_CPG_COMPLETE": f"complete_{shell}",
        "COMP_WORDS": words,
        "COMP_CWORD": str(cword),
        "_TYPER_COMPLETE_ARGS": words,
        "_TYPER_COMPLETE_FISH_ACTION": "get-args",
    }
    env.pop("CPG_OUTPUT_DIR", None)
    return subprocess.run(
        [CPG], env=env, cwd=cwd, capture_output=True, text=True, timeout=60
    ).stdout


def test_shell_completion_in_a_real_bash(replayed: tuple[Path, Path]) -> None:
    import shutil
    import subprocess

    from conftest import CPG

    out, _ = replayed
    script = cpg("completion", "bash")
    assert script.returncode == 0 and "_CPG_COMPLETE" in script.stdout
    bash = shutil.which("bash")
    assert bash is not None
    probe = (
        f"source <({CPG} completion bash)\n"
        'show() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _cpg_completion cpg; '
        "printf '%s\\n' \"${COMPREPLY[@]}\"; echo --; }\n"
        f"show cpg explain -d {out} sh\n"
        "show cpg ver\n"
        "show cpg replay --dry\n"
    )
    import os

    path = f"{Path(CPG).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    ran = subprocess.run(
        [bash, "--norc", "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PATH": path},
    )
    workloads, commands, flags, _ = ran.stdout.split("--\n")
    assert workloads.split() == ["shop/cart", "shop/frontend"], ran.stderr
    assert commands.split() == ["version", "verify"]
    assert flags.split() == ["--dry-run"]


def test_completion_of_workloads_from_the_policy_folder(
    replayed: tuple[Path, Path], tmp_path: Path
) -> None:
    out, _ = replayed
    # without -d: ./policies, as explain itself reads
    (tmp_path / "policies").symlink_to(out)
    assert "payments/ledger" in _complete("zsh", "cpg explain pay", 2, tmp_path)
    assert "payments/payments-api" in _complete("fish", "cpg explain pay", 2, tmp_path)
    assert _complete("bash", "cpg explain pay", 2, tmp_path).split() == [
        "payments/ledger",
        "payments/payments-api",
    ]
    for shell in ("zsh", "fish", "powershell"):
        script = cpg("completion", shell)
        assert script.returncode == 0 and "_CPG_COMPLETE" in script.stdout, shell
    unknown = cpg("completion", "tcsh")
    assert unknown.returncode == 2 and "'tcsh' is not one of bash, zsh, fish" in unknown.stderr


def test_arguments_show_their_placeholder_not_a_python_type() -> None:
    for command in ("replay", "verify", "plan", "explain", "completion"):
        helped = cpg(command, "-h").stdout
        assert "<list[str]>" not in helped and "<str>" not in helped, command
    assert "FILE|DIR|GLOB|URL...|-" in cpg("replay", "-h").stdout


def test_report_follows_the_conventions_it_can(replayed: tuple[Path, Path]) -> None:
    """report prints Markdown or HTML, not JSON; -h, -d and the -o hint hold as elsewhere."""
    out, evidence = replayed
    assert cpg("report", "-h").returncode == 0
    ran = cpg("report", "-d", str(out), "--evidence-dir", str(evidence))
    assert ran.returncode == 0 and ran.stdout.startswith("# cpg report:")
    folder = cpg("report", "-d", str(out), "-o", str(out))
    assert folder.returncode == 2 and "-o is the output format" in folder.stderr


def test_a_ctrl_c_python_could_not_raise_is_raised_again_not_printed() -> None:
    """A KeyboardInterrupt in a callback (an import lock's) reaches sys.unraisablehook: cpg
    raises it again in the main thread (exit 130), after the hook has returned (an exception
    leaving a hook is printed as 'Exception ignored', never raised)."""
    import pytest

    from cpg_cli.entry import _interrupt_again

    class Unraisable:
        exc_value = KeyboardInterrupt()

    with pytest.raises(KeyboardInterrupt):
        _interrupt_again(Unraisable())  # returns: nothing is raised inside the hook
        returned = True
        for _ in range(10**9):  # the interrupt lands at a check of the main loop
            pass
    assert returned


def test_the_cli_loads_a_command_only_when_it_is_needed() -> None:
    """Importing the app (what ``cpg version``, ``cpg -h`` and TAB pay for) loads none of cpg's
    libraries nor the heavy ones they bring; ``cpg -h`` lists every command from the table."""
    import subprocess
    import sys

    probe = (
        "import sys, cpg_cli.app; "
        "print(sorted({m.split('.')[0] for m in sys.modules}"
        " & {'grpc', 'kubernetes', 'rich', 'pydantic', 'fsspec', 'cpg_core', 'cpg_io', 'yaml'}))"
    )
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert ran.stdout.strip() == "[]"
    helped = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from cpg_cli.app import main; sys.argv = ['cpg', '-h']; main()",
        ],
        capture_output=True,
        text=True,
    )
    assert helped.returncode == 0
    for name in ("replay", "generate", "shadow", "drift", "lint", "propose", "why", "mcp"):
        assert f"\n  {name} " in helped.stdout, name


def test_a_replay_loads_neither_the_live_client_nor_the_html_report(tmp_path: Path) -> None:
    """A replay pays only for what it uses: not grpc and protobuf (a live capture's), not
    jinja2 (an HTML report's), not kubernetes."""
    import subprocess
    import sys

    probe = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('LOADED', sorted({m.split('.')[0] for m in sys.modules}"
        " & {'grpc', 'google', 'jinja2', 'kubernetes', 'asyncio'}), file=sys.stderr))\n"
        "from cpg_cli.app import main\n"
        f"sys.argv = ['cpg', 'replay', {str(EXAMPLE)!r}, '-d', {str(tmp_path / 'p')!r}]\n"
        "main()\n"
    )
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    assert (tmp_path / "p").is_dir()
    assert "LOADED []" in ran.stderr, ran.stderr


def test_each_lazy_summary_is_the_commands_own_first_line() -> None:
    from cpg_cli.app import LAZY, load_command

    for name, lazy in LAZY.items():
        command = load_command(name)
        first = (command.help or "").strip().split("\n\n", 1)[0].replace("\n", " ")
        assert lazy.summary == first, name


def test_tab_on_a_command_name_loads_no_command() -> None:
    import subprocess
    import sys

    probe = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('LOADED', sorted({m.split('.')[0] for m in sys.modules}"
        " & {'cpg_core', 'cpg_io', 'grpc', 'kubernetes'}), file=sys.stderr))\n"
        "from cpg_cli.app import app\n"
        "app(prog_name='cpg')\n"
    )
    env = {"_CPG_COMPLETE": "complete_zsh", "_TYPER_COMPLETE_ARGS": "cpg pro", "PATH": ""}
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env)
    assert '"propose":"Propose a run' in ran.stdout, ran.stdout + ran.stderr
    assert "LOADED []" in ran.stderr


def test_help_groups_the_options_and_o_completes_its_formats(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    helped = cpg("replay", "-h").stdout
    sections = [
        line[:-1] for line in helped.splitlines() if line.endswith(":") and line[0].isupper()
    ]
    assert sections == [
        "Arguments",
        "Input",
        "Output",
        "Cluster safety",
        "Readiness",
        "Evidence",
        "L7",
        "Time window",
        "Cluster",
        "Cilium semantics",
        "Engine",
        "Flow filters (as hubble observe)",
        "Logging",
        "Options",
    ]
    evidence = helped.split("\nEvidence:\n", 1)[1].split("\n\n", 1)[0]
    assert "--evidence-dir" in evidence and "--no-evidence" in evidence
    assert "--tls" in cpg("generate", "-h").stdout.split("\nHubble Relay:\n", 1)[1].split("\n\n")[0]
    env = {
        **os.environ,
        "_CPG_COMPLETE": "complete_bash",
        "COMP_WORDS": "cpg lint x -o s",
        "COMP_CWORD": "4",
    }
    probe = "from cpg_cli.app import app; app(prog_name='cpg')"
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env)
    assert ran.stdout.split() == ["sarif"], ran.stdout + ran.stderr


def test_next_steps_repeat_the_evidence_dir_and_empty_evidence_is_said(tmp_path: Path) -> None:
    import shlex

    from conftest import EXAMPLE

    out, evidence = tmp_path / "out", tmp_path / "my evidence"
    ran = cpg("replay", str(EXAMPLE), "-d", str(out), "--evidence-dir", str(evidence))
    assert ran.returncode == 0, ran.stderr
    explain = next(line for line in ran.stdout.splitlines() if line.startswith("  explain: "))
    assert f"--evidence-dir {shlex.quote(str(evidence))}" in explain
    plan = next(line for line in ran.stdout.splitlines() if line.startswith("  plan: "))
    assert "--evidence-dir" in plan
    copied = cpg(*shlex.split(explain.split(": ", 1)[1])[1:])  # the line, pasted
    assert copied.returncode == 0, copied.stderr
    default = cpg("replay", str(EXAMPLE), "-d", str(tmp_path / "plain"))
    assert "--evidence-dir" not in default.stdout
    wrong = cpg("report", "-d", str(out))  # the evidence is elsewhere
    assert wrong.returncode == 0
    assert "no evidence for any of the 6 policies: looked in" in wrong.stderr
    assert "give the --evidence-dir the run that wrote them used" in wrong.stderr
    right = cpg("report", "-d", str(out), "--evidence-dir", str(evidence))
    assert "no evidence" not in right.stderr
    planned = cpg("plan", str(EXAMPLE), "-d", str(out))
    assert "no evidence for any of the 6 proposed policies" in planned.stderr


def test_cpg_mcp_help_and_errors_look_like_every_other_command() -> None:
    import subprocess

    from conftest import CPG

    helped = subprocess.run([CPG, "mcp", "-h"], capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0
    assert helped.stdout.startswith("Usage: cpg-mcp [OPTIONS]\n\n  Read-only MCP stdio server")
    assert "\nOptions:\n  --allow-replay-dir DIR " in helped.stdout
    assert "  -h, --help " in helped.stdout and "Show this message and exit." in helped.stdout
    assert "usage:" not in helped.stdout  # argparse's own layout is gone
    bad = subprocess.run([CPG, "mcp", "--bogus"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2
    assert bad.stderr.startswith("Usage: cpg-mcp [OPTIONS]\nTry 'cpg-mcp -h' for help.\n\nError:")


def test_tab_on_a_commands_flags_loads_none_of_its_libraries() -> None:
    """Completing a command's own flags builds the command, not its run: no cpg run layer,
    no pydantic (typer's value conversion), grpc, kubernetes, rich, jinja2 or yaml."""
    import subprocess
    import sys

    from cpg_cli.app import LAZY

    heavy = ("pydantic", "grpc", "kubernetes", "rich", "jinja2", "yaml", "fsspec", "msgspec")
    probe = (
        "import atexit, sys\n"
        "def loaded():\n"
        f"    heavy = {heavy!r}\n"
        "    found = sorted(m for m in sys.modules if m.split('.')[0] in heavy"
        " or m.startswith(('cpg_io.runs._', 'cpg_core._synthesis.aggregate', 'cpg_core._review.plan')))\n"
        "    print('LOADED', found, file=sys.stderr)\n"
        "atexit.register(loaded)\n"
        "from cpg_cli.app import app\n"
        "app(prog_name='cpg')\n"
    )
    for command in LAZY:
        env = {
            "_CPG_COMPLETE": "complete_bash",
            "COMP_WORDS": f"cpg {command} --",
            "COMP_CWORD": "2",
            "PATH": "",
        }
        ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env)
        assert "LOADED []" in ran.stderr, (command, ran.stderr[-2000:])
        if command != "mcp":  # cpg mcp hands its flags to cpg-mcp
            assert "--help" in ran.stdout.split(), (command, ran.stdout)
    # the words typed still steer it: a value after -d, and -o's formats
    env = {"_CPG_COMPLETE": "complete_bash", "COMP_WORDS": "cpg replay -o ", "COMP_CWORD": "3"}
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env)
    assert ran.stdout.split() == ["text", "json", "yaml"], ran.stdout + ran.stderr


def test_a_logged_message_names_its_settings_as_flags(capsys: pytest.CaptureFixture[str]) -> None:
    """The receiving process's warnings ("Hubble stream lost (… check server …)") reach the
    log as messages naming settings; the CLI's log shows each as its flag."""
    import logging

    from cpg_cli.options import setup_logging
    from cpg_core import Message, Setting

    setup_logging("info")
    try:
        logging.getLogger("cpg.live").warning(
            Message("Hubble stream lost (check ", Setting("server"), "); reconnecting in 1.0s")
        )
        logging.getLogger("cpg.live").warning("plain %s", "words")
    finally:
        logging.basicConfig(handlers=[logging.NullHandler()], force=True)
    err = capsys.readouterr().err
    assert "cpg: WARNING: Hubble stream lost (check --server); reconnecting in 1.0s" in err
    assert "cpg: WARNING: plain words" in err


def test_a_file_named_like_an_option_is_refused_before_and_read_after_dashes(
    tmp_path: Path,
) -> None:
    from conftest import cpg_process

    (tmp_path / "--context=evil.yaml").write_text("kind: ConfigMap\nmetadata: {name: x}\n")
    refused = cpg_process("lint", "--context=evil.yaml", cwd=tmp_path)
    assert refused.returncode == 2
    assert "'--context=evil.yaml' is an option's name and a file's" in refused.stderr
    assert "after --" in refused.stderr
    read = cpg_process("lint", "--", "--context=evil.yaml", cwd=tmp_path)
    assert read.returncode == 0 and "1 file(s): no findings" in read.stdout
    # an unreadable file's name never breaks the error line (a newline cannot forge a line)
    odd = tmp_path / "not-a-policy\n::error file=x::b.yaml"
    odd.write_bytes(b"\xff\xfe")
    ran = cpg_process("lint", "--", odd.name, cwd=tmp_path)
    assert ran.returncode == 3 and "CPG001" in ran.stdout, ran.stdout
    assert not any(line.startswith("::") for line in ran.stdout.splitlines()), ran.stdout
    gone = cpg_process("verify", str(EXAMPLE), "--policies", odd.name, cwd=tmp_path)
    assert gone.returncode == 1 and len(gone.stderr.strip().splitlines()) == 1, gone.stderr


def test_a_misspelt_command_gets_the_closest_one_named() -> None:
    """``cpg repaly`` said only "No such command"; kubectl and git name the command meant."""
    misspelt = cpg("repaly", "capture.jsonl")
    assert misspelt.returncode == 2
    assert "No such command 'repaly'. Did you mean 'replay'?" in misspelt.stderr
    assert "Did you mean 'verify'?" in cpg("verfy").stderr
    unknown = cpg("zzzz")
    assert unknown.returncode == 2 and "No such command 'zzzz'." in unknown.stderr
    assert "Did you mean" not in unknown.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("report", "-d", "nope"),
        ("verify", "CAPTURE", "-d", "nope"),
        ("plan", "CAPTURE", "-d", "nope"),
        ("why", "CAPTURE", "-d", "nope"),
        ("drift", "CAPTURE", "-d", "nope"),
        ("explain", "shop/cart", "-d", "nope"),
    ],
)
def test_errors_name_flags_not_python_names(tmp_path: Path, args: tuple[str, ...]) -> None:
    """``cpg report -d nope`` said "give the output_dir the policies were written to"."""
    from conftest import EXAMPLE

    ran = cpg(*(str(EXAMPLE) if a == "CAPTURE" else a for a in args), cwd=tmp_path)
    assert ran.returncode in (1, 2), ran.stderr
    assert "nope" in ran.stderr
    assert not re.search(r"\b(output|evidence)_dir\b", ran.stderr), ran.stderr


def test_one_output_vocabulary(tmp_path: Path) -> None:
    """-o took three vocabularies (text/json, markdown/html/json, yaml/json): every command
    takes text (its format for people), json and yaml (the same data as the json)."""
    import json

    import yaml

    from conftest import EXAMPLE

    capture = str(EXAMPLE)
    assert cpg("replay", capture, "-d", "p", "-q", cwd=tmp_path).returncode == 0
    commands = [
        ("replay", capture, "-d", "p", "-q"),
        ("verify", capture, "-d", "p"),
        ("plan", capture, "-d", "p"),
        ("why", capture, "-d", "p"),
        ("drift", capture, "-d", "p"),
        ("lint", "p"),
        ("explain", "shop/cart", "-d", "p"),
        ("report", "-d", "p"),
        ("bootstrap", "-n", "shop"),
        ("version",),
    ]
    for command in commands:
        ran = {fmt: cpg(*command, "-o", fmt, cwd=tmp_path) for fmt in ("text", "json", "yaml")}
        for fmt, done in ran.items():
            assert done.returncode in (0, 3), (command, fmt, done.stderr)
        data = json.loads(ran["json"].stdout)
        as_yaml = yaml.safe_load(ran["yaml"].stdout)
        if command[0] in ("replay", "drift"):  # timings and times of the run itself differ
            assert set(as_yaml) == set(data), command
        else:
            assert as_yaml == data, command
        assert ran["text"].stdout and not ran["text"].stdout.lstrip().startswith("{"), command
    bad = cpg("plan", capture, "-d", "p", "-o", "xml", cwd=tmp_path)
    assert bad.returncode == 2 and "text, json, yaml" in bad.stderr


def test_the_hook_sends_the_ctrl_c_from_a_thread_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Sent from the main thread, the interrupt is taken at once, inside the hook, where it
    would only be printed: the hook starts a thread that sends it, and raises nothing."""
    import _thread

    from cpg_cli.entry import _interrupt_again

    started: list[object] = []
    monkeypatch.setattr(_thread, "start_new_thread", lambda f, args: started.append(f))

    class Unraisable:
        exc_value = KeyboardInterrupt()

    _interrupt_again(Unraisable())  # type: ignore[arg-type]
    assert started == [_thread.interrupt_main]
