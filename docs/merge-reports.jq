# Merges the JSON reports of several `budget-top check` shards into one report of the same shape.
# Usage: jq -s -f docs/merge-reports.jq shard-*.json
# Counts, waste, outcomes and coverage add up exactly (each shard holds whole chains). An edge's
# latency percentiles and inferred timeout cannot be merged from percentiles: the merged p50 is
# the median of the shards' (weighted by calls), p99 and the timeout the largest; an edge's own
# `timeout_oversized` finding is judged per shard.
def sum(f): map(f) | add // 0;
def add_counts: map(to_entries) | add // [] | group_by(.key)
  | map({key: .[0].key, value: (map(.value) | add)}) | from_entries;
def weighted_median(f): map(select(f != null) | {v: f, n: .calls}) | sort_by(.v)
  | if length == 0 then null
    else (map(.n) | add) as $total
      | reduce .[] as $x ({seen: 0, m: null};
          if .m == null and (.seen + $x.n) * 2 >= $total then .m = $x.v else . end
          | .seen += $x.n) | .m
    end;
def largest(f): map(f | select(. != null)) | max;
{
  summary: {
    traces: sum(.summary.traces),
    spans: sum(.summary.spans),
    hops: sum(.summary.hops),
    findings: (map(.summary.findings) | add_counts),
    wasted_ms: sum(.summary.wasted_ms),
    outcomes: (map(.summary.outcomes) | add_counts),
    coverage: {
      hops_with_budget: sum(.summary.coverage.hops_with_budget),
      hops_without_budget: sum(.summary.coverage.hops_without_budget),
      services_without_budget: (map(.summary.coverage.services_without_budget) | add // []
        | unique)
    }
  },
  findings: (map(.findings) | add // []),
  edges: (map(.edges) | add // [] | group_by([.caller, .callee])
    | map({caller: .[0].caller, callee: .[0].callee, calls: sum(.calls),
           findings: (map(.findings) | add_counts),
           wasted_ms: sum(.wasted_ms),
           timeout_ms: largest(.timeout_ms),
           timeout_inferred: (largest(.timeout_ms) as $t
             | any(.[]; .timeout_ms == $t and .timeout_inferred)),
           latency_p50_ms: weighted_median(.latency_p50_ms),
           latency_p99_ms: largest(.latency_p99_ms)}))
}
