#!/usr/bin/env python3
"""Renders troupe-bench JSON lines (`--json`) as a Markdown table: one row per result.

    cargo run --release -p troupe-bench -- all --json > all.jsonl
    python3 scripts/results_table.py all.jsonl
"""
import json
import sys


def fmt(x):
    """Three significant figures, never in exponent notation."""
    if x >= 1e6:
        return f"{x / 1e6:.3g} M"
    if x >= 1e4:
        return f"{x / 1e3:.3g} k"
    if x >= 100:
        return f"{x:.0f}"
    if x >= 0.001 or x == 0:
        return f"{x:.3g}"
    return f"{x:.6f}".rstrip("0")


def main(path):
    rows = []
    try:
        lines = open(path).read().splitlines()
    except OSError as error:
        sys.exit(f"cannot read {path}: {error.strerror}")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            for key in ("scenario", "metric", "contender", "params", "median", "min", "max",
                        "unit", "samples", "machine"):
                row[key]
        except (ValueError, KeyError, TypeError) as error:
            sys.exit(f"{path}, line {number}: not a result line ({error!r})")
        rows.append(row)
    if not rows:
        sys.exit(f"{path}: no results")
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
