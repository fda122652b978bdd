#!/usr/bin/env bash
# The cpg GitHub Action's gate (action.yml): lint the policy files, verify and plan them on a
# capture when one is given, write the Markdown report to the step summary and to outputs,
# and fail on what the inputs say. Inputs arrive as CPG_* environment variables (never
# spliced into this script: a pull request's file names are data, not shell).
set -uo pipefail

policies="${CPG_POLICIES:-policies}"
work="${RUNNER_TEMP:-${TMPDIR:-/tmp}}/cpg-gate"
rm -rf "$work"
mkdir -p "$work"
summary="${GITHUB_STEP_SUMMARY:-/dev/null}"
outputs="${GITHUB_OUTPUT:-/dev/null}"
failed=0

say() { printf '%s\n' "$*" >&2; }
# File names, labels and messages from a pull request reach the job log through cpg's output:
# none of it may run a workflow command (a line starting "::error file=…::" would forge an
# annotation). Commands stay off for the whole gate (it issues none) and come back on exit.
resume="cpg-gate-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
printf '::stop-commands::%s\n' "$resume"
printf '::stop-commands::%s\n' "$resume" >&2
trap 'printf "::%s::\n" "$resume"; printf "::%s::\n" "$resume" >&2' EXIT
output() { printf '%s=%s\n' "$1" "$2" >> "$outputs"; }
# The count a cpg output holds (sarif: its results; plan: would_break_flows); exit 1 with the
# reason on stderr when the file is missing, empty, not UTF-8 or not the shape expected.
count() {
    python3 - "$1" "$2" <<'PY'
import json, sys
path, kind = sys.argv[1], sys.argv[2]
try:
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    value = len(data["runs"][0]["results"]) if kind == "sarif" else data["would_break_flows"]
    if not isinstance(value, int) or value < 0:
        raise ValueError(f"not a count: {value!r}")
except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
    print(f"{path}: {exc}", file=sys.stderr)
    sys.exit(1)
print(value)
PY
}

# 1. lint: the given paths, else the policy files this pull request changed, else the folder
paths=()
if [ -n "${CPG_LINT_PATHS:-}" ]; then
    read -r -a paths <<< "$CPG_LINT_PATHS"
elif [ -n "${GITHUB_BASE_REF:-}" ] && git rev-parse --verify -q "origin/${GITHUB_BASE_REF}" >/dev/null; then
    while IFS= read -r -d '' file; do
        paths+=("$file")
    done < <(git diff -z --name-only --diff-filter=ACMR "origin/${GITHUB_BASE_REF}...HEAD" -- '*.yaml' '*.yml')
fi
if [ "${#paths[@]}" -eq 0 ] && [ -e "$policies" ]; then
    paths=("$policies")
fi
lint_findings=0
lint_unread=0
if [ "${#paths[@]}" -gt 0 ]; then
    # paths after --: a file named like an option (--context=x.yaml) is still a path
    cpg lint -o text -- "${paths[@]}" > "$work/lint.txt"
    lint_rc=$?
    cpg lint -o sarif -- "${paths[@]}" > "$work/lint.sarif"
    sarif_rc=$?
    # fail closed: what cannot be read or counted is never "no findings"
    if ! lint_findings=$(count "$work/lint.sarif" sarif 2> "$work/lint-count.err"); then
        say "cpg lint's SARIF could not be counted (exit $sarif_rc): $(cat "$work/lint-count.err")"
        lint_findings=0
        lint_unread=1
        failed=1
    elif [ "$lint_rc" -eq 3 ] && [ "$lint_findings" -eq 0 ]; then
        say "cpg lint exited 3 (findings) but its SARIF holds none: failing closed"
        lint_unread=1
        failed=1
    fi
    if [ "$lint_rc" -ne 0 ] && [ "$lint_rc" -ne 3 ]; then
        say "cpg lint could not run (exit $lint_rc):"; cat "$work/lint.txt" >&2
        lint_unread=1
        failed=1
    fi
fi
output lint-findings "$lint_findings"
output sarif "$work/lint.sarif"
if [ "$lint_findings" -gt 0 ] && [ "${CPG_FAIL_ON_LINT:-true}" = "true" ]; then
    say "cpg lint: $lint_findings finding(s)"
    failed=1
fi

# 2. verify and plan on a capture (a path, or an http(s) URL fetched first)
verdict="no-capture"
would_break=0
unadmitted=0
capture="${CPG_CAPTURE:-}"
if [ -n "$capture" ]; then
    case "$capture" in
        http://*|https://*)
            if ! curl -fsSL --max-time 300 -o "$work/capture.jsonl" -- "$capture"; then
                say "could not download the capture from $capture"
                exit 1
            fi
            capture="$work/capture.jsonl"
            ;;
    esac
    cpg verify "$capture" --policies "$policies" > "$work/verify.txt" 2>&1
    verify_rc=$?
    if [ "$verify_rc" -eq 3 ]; then
        unadmitted=1
    elif [ "$verify_rc" -eq 4 ]; then
        say "cpg verify cannot judge: the capture has no denied flow it can check"
    elif [ "$verify_rc" -ne 0 ]; then
        say "cpg verify could not run (exit $verify_rc):"; cat "$work/verify.txt" >&2
        failed=1
    fi
    current=()
    if [ -n "${CPG_CURRENT:-}" ]; then current=(--current "$CPG_CURRENT"); fi
    cpg plan "$capture" --policies "$policies" "${current[@]}" -o json > "$work/plan.json" 2> "$work/plan.err"
    plan_rc=$?
    case "$plan_rc" in
        0) verdict="nothing_breaks" ;;
        3) verdict="breaks" ;;
        4) verdict="cannot_judge" ;;
        *) say "cpg plan could not run (exit $plan_rc):"; cat "$work/plan.err" >&2; failed=1 ;;
    esac
    if [ "$plan_rc" -eq 0 ] || [ "$plan_rc" -eq 3 ] || [ "$plan_rc" -eq 4 ]; then
        if ! would_break=$(count "$work/plan.json" plan 2> "$work/plan-count.err"); then
            say "cpg plan's JSON could not be read (exit $plan_rc): $(cat "$work/plan-count.err")"
            would_break=0
            verdict="unreadable"
            failed=1
        fi
    fi
    if [ "$verdict" = "breaks" ] && [ "${CPG_FAIL_ON_BREAK:-true}" = "true" ]; then
        say "cpg plan: $would_break flow(s) that work today would break"
        failed=1
    fi
    if [ "$unadmitted" -eq 1 ] && [ "${CPG_FAIL_ON_UNADMITTED:-true}" = "true" ]; then
        say "cpg verify: the policies do not admit every denied flow of the capture"
        failed=1
    fi
fi
output verdict "$verdict"
output would-break "$would_break"

# 3. the report: the step summary, a file, and an output a later step can post as a comment.
# The comment stays under GitHub's 65,536 characters: the lint and verify texts are cut to
# what needs a look, and cpg report is given what is left; the whole texts go to the
# artifact folder (action.yml uploads it).
artifacts="$work/artifacts"
mkdir -p "$artifacts"
artifact="${CPG_ARTIFACT_NAME-cpg-review}"
where="report-full.md in the artifact $artifact"
if [ -z "$artifact" ]; then where="$artifacts/report-full.md"; fi
budget="${CPG_COMMENT_BUDGET:-60000}"
for kept in lint.txt lint.sarif verify.txt plan.json; do
    if [ -e "$work/$kept" ]; then cp "$work/$kept" "$artifacts/$kept"; fi
done
# at most $2 lines of a file, then how many more and where they are
head_of() {
    local lines
    lines=$(wc -l < "$1")
    head -n "$2" -- "$1"
    if [ "$lines" -gt "$2" ]; then
        echo "… $((lines - $2)) more lines: the whole text is ${where/report-full.md/$(basename "$1")}"
    fi
}
header="$work/header.md"
{
    echo "## cpg: policy check"
    echo
    if [ "${#paths[@]}" -eq 0 ]; then
        echo "No policy file to lint."
    elif [ "$lint_unread" -eq 1 ]; then
        echo "**cpg lint**: its output could not be read or counted: the check fails (see the job log)."
        echo
        echo '```'
        head_of "$work/lint.txt" 40
        echo '```'
    elif [ "$lint_findings" -eq 0 ]; then
        echo "**cpg lint**: no findings."
    else
        echo "**cpg lint**: $lint_findings finding(s)."
        echo
        echo '```'
        head_of "$work/lint.txt" 40
        echo '```'
    fi
    echo
    if [ -n "$capture" ]; then
        echo "**cpg plan**: \`$verdict\` ($would_break flow(s) would break)."
        echo
        # verify: its verdict line and the flows it does not admit (admitted ones are many)
        grep -v '^  admitted ' "$work/verify.txt" > "$work/verify-short.txt" || true
        echo "<details><summary>cpg verify: $(tail -n 1 "$work/verify.txt")</summary>"
        echo
        echo '```'
        head_of "$work/verify-short.txt" 60
        echo '```'
        echo
        echo "</details>"
        echo
    fi
} > "$header"
report="$work/report.md"
cp "$header" "$report"
if [ -d "$policies" ]; then
    plan_args=()
    if [ -s "$work/plan.json" ]; then plan_args=(--plan "$work/plan.json"); fi
    room=$((budget - $(wc -m < "$header")))
    if [ "$room" -lt 2000 ]; then room=2000; fi
    cpg report -d "$policies" "${plan_args[@]}" --max-size "$room" \
        --full-report "$where" \
        >> "$report" 2> "$work/report.err" || cat "$work/report.err" >> "$report"
    cpg report -d "$policies" "${plan_args[@]}" --max-size 0 > "$artifacts/report-full.md" 2>/dev/null
fi
output artifacts "$artifacts"
cat "$report" >> "$summary"
output report-file "$report"
delimiter="cpg_report_$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
{
    echo "report<<$delimiter"
    cat "$report"
    echo "$delimiter"
} >> "$outputs"
exit "$failed"
