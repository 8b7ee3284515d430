# Merges the JSON reports of several `budget-top check` shards into one report of the same shape.
# Usage: jq -s -f docs/merge-reports.jq shard-*.json
def sum(f): map(f) | add // 0;
def add_counts: map(to_entries) | add // [] | group_by(.key)
  | map({key: .[0].key, value: (map(.value) | add)}) | from_entries;
{
  summary: {
    traces: sum(.summary.traces),
    spans: sum(.summary.spans),
    hops: sum(.summary.hops),
    findings: (map(.summary.findings) | add_counts)
  },
  findings: (map(.findings) | add // []),
  edges: (map(.edges) | add // [] | group_by([.caller, .callee])
    | map({caller: .[0].caller, callee: .[0].callee, calls: sum(.calls),
           findings: (map(.findings) | add_counts)}))
}
