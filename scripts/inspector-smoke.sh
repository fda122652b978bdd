#!/usr/bin/env bash
# Drive cpg-mcp through an independent MCP client, the MCP Inspector CLI: tools/list with
# `inspector --cli`, then a replay session end to end over one persistent connection (mcpdo,
# from the same package). Needs node/npm and the project's venv (make install).
# Usage: scripts/inspector-smoke.sh [path/to/cpg-mcp]
set -euo pipefail
# `... | check NAME EXPR` must count its failures in this shell, not in a pipeline's subshell.
shopt -s lastpipe

INSPECTOR="@modelcontextprotocol/inspector@2.12.0"
here="$(cd "$(dirname "$0")/.." && pwd)"
server="${1:-$here/.venv/bin/cpg-mcp}"
[[ -x "$server" ]] || { echo "inspector-smoke: $server not found; run make install" >&2; exit 2; }
command -v npx >/dev/null || { echo "inspector-smoke: npx not found; install node and npm" >&2; exit 2; }

scratch="$(mktemp -d)"
conn=cpg-smoke
# The Inspector keeps its catalog and daemon state under HOME: keep them out of the user's.
export HOME="$scratch/home" MCP_INSPECTOR_SECRET_STORE=memory MCP_CATALOG_PATH="$scratch/mcp.json"
mkdir -p "$HOME" "$scratch/captures"
cp "$here/examples/drops.jsonl" "$scratch/captures/"
mcpdo() { npx -y -p "$INSPECTOR" mcpdo "$@" 2>/dev/null; }
cleanup() {
  mcpdo --connection "$conn" disconnect >/dev/null || true
  mcpdo daemon stop >/dev/null || true
  rm -rf "$scratch"
}
trap cleanup EXIT

failures=0
check() { # check NAME PYTHON-EXPRESSION-ON-d < json
  local name="$1" expr="$2" out
  if out="$(python3 -c "import json,sys; d=json.load(sys.stdin); assert $expr, d; print('ok')" 2>&1)"; then
    echo "ok    $name"
  else
    echo "FAIL  $name: ${out: -400}"; failures=$((failures + 1))
  fi
}
call() { # call TOOL JSON-ARGS -> the structuredContent, or the whole result when isError
  { mcpdo --connection "$conn" --format json tools/call "$1" "$2" || true; } |
    python3 -c "import json,sys; r=json.load(sys.stdin); r=r.get('result', r); \
print(json.dumps(r.get('structuredContent', r)))"
}

npx -y "$INSPECTOR" --cli -q --method tools/list -- "$server" 2>/dev/null |
  check "tools/list: thirteen tools, read-only queries" \
  "sorted(t['name'] for t in d['tools']) == sorted(['start_session','get_status','stop_session',\
'list_dropped_flows','list_policies','get_policy','get_evidence','get_cluster_health',\
'get_bootstrap_policy','get_plan','get_report','explain_flow','trace_flow']) and \
all(t['annotations']['readOnlyHint'] for t in d['tools'] \
if t['name'].startswith(('list_','get_','explain_','trace_')))"

mcpdo connect --connection "$conn" -- "$server" --allow-replay-dir "$scratch/captures" >/dev/null
sid="$(call start_session '{"replay_file":"drops.jsonl"}' |
  python3 -c "import json,sys; print(json.load(sys.stdin)['session_id'])")"
echo "ok    start_session: $sid"
for _ in $(seq 100); do
  state="$(call get_status "{\"session_id\":\"$sid\"}" |
    python3 -c "import json,sys; print(json.load(sys.stdin)['state'])")"
  [[ "$state" == stopped ]] && break
  sleep 0.1
done
call get_status "{\"session_id\":\"$sid\"}" | check "get_status: stopped, 6 policies" \
  "d['state'] == 'stopped' and d['policy_file_count'] == 6"
call list_policies "{\"session_id\":\"$sid\",\"limit\":4}" | check "list_policies: paged" \
  "d['total_count'] == 6 and d['has_more'] and len(d['policies']) == 4 and \
not d['policies'][0]['path'].startswith('/')"
call get_policy "{\"session_id\":\"$sid\",\"namespace\":\"shop\",\"workload\":\"cart\"}" |
  check "get_policy: YAML" "'kind: CiliumNetworkPolicy' in d['yaml']"
call get_evidence "{\"session_id\":\"$sid\",\"namespace\":\"shop\",\"workload\":\"cart\"}" |
  check "get_evidence: rules" "d['matched_rules'] and d['matched_rules'][0]['samples']"
call stop_session "{\"session_id\":\"$sid\"}" | check "stop_session" \
  "d['state'] == 'stopped' and d['flows_seen'] == 64"
call list_dropped_flows "{\"session_id\":\"$sid\"}" | check "list_dropped_flows" \
  "d['samples'] and d['aggregates']['rows']"
call get_cluster_health "{\"session_id\":\"$sid\"}" | check "get_cluster_health" \
  "any(x['reason'] == 'CT_MAP_INSERTION_FAILED' for x in d['report']['drops'])"
call get_plan "{\"session_id\":\"$sid\",\"section\":\"diffs\",\"limit\":2}" |
  check "get_plan: a section paged, every total" \
  "d['section'] == 'diffs' and len(d['diffs']) == 2 and d['totals']['diffs'] == 6 and d['has_more']"
call get_report "{\"session_id\":\"$sid\",\"max_size\":4000}" | check "get_report: paged" \
  "d['markdown'].startswith('# cpg report') and len(d['markdown']) <= 4000 and d['has_more']"
call explain_flow "{\"session_id\":\"$sid\",\"to_pod\":\"shop/cart\"}" |
  check "explain_flow: answers" "d['answers'] and d['total_count'] >= len(d['answers'])"
call trace_flow "{\"session_id\":\"$sid\",\"source\":\"shop/frontend\",\"destination\":\"shop/cart\",\"port\":\"8080/TCP\"}" |
  check "trace_flow: admitted" "d['answers'] and all(a['allowed'] for a in d['answers'])"
call get_policy "{\"session_id\":\"$sid\",\"namespace\":\"..\",\"workload\":\"cart\"}" |
  check "get_policy refuses traversal" "d['isError']"
mcpdo --connection "$conn" disconnect >/dev/null

if ((failures)); then echo "inspector-smoke: $failures check(s) failed" >&2; exit 1; fi
echo "inspector-smoke: all checks passed"
