#!/usr/bin/env python3
"""Renders troupe-bench JSON lines (`--json`) as a Markdown table: one row per result.

    cargo run --release -p troupe-bench -- all --json > all.jsonl
    python3 scripts/results_table.py all.jsonl
"""
import json
import sys


def fmt(x):
    if x >= 1e6:
        return f"{x / 1e6:.3g} M"
    if x >= 1e4:
        return f"{x / 1e3:.3g} k"
    return f"{x:.3g}"


def main(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    if not rows:
        sys.exit("no results")
    m = rows[0]["machine"]
    print(f"Machine: {m['cpu']}, {m['cores']} cores, {m['os']}; "
          f"{m.get('compiler', '?')}, commit {m.get('commit', '?')}.\n")
    print("| scenario | metric | contender | parameters | median | min | max | unit | n |")
    print("|---|---|---|---|---:|---:|---:|---|---:|")
    for r in rows:
        params = " ".join(f"{k}={v}" for k, v in r["params"].items())
        print(f"| {r['scenario']} | {r['metric']} | {r['contender']} | {params} | "
              f"{fmt(r['median'])} | {fmt(r['min'])} | {fmt(r['max'])} | {r['unit']} | "
              f"{len(r['samples'])} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "results/all.jsonl")
