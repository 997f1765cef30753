"""Two reports of the same experiment, number by number: every numeric leaf both JSON files hold at the same path
(a committed `oracle.json` or `summary.json` against the one a fresh `make reproduce` wrote). Prints how many
numbers were compared, how many differ by more than the tolerance, and the largest differences; exit 1 when any
does (NaN equals NaN; a path only one file holds is counted, not compared).

    python reproductions/bench/compare_json.py reproductions/results/autoresearch_oracle/oracle.json \
        reproductions/runs/latest/autoresearch/oracle/oracle.json [--abs 1e-6] [--rel 0.05] [--ignore cpu_s]
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path


def leaves(value, path: str = ""):
    "(path, number) for every int or float leaf; bools and strings are not numbers here."
    if isinstance(value, dict):
        for key, item in value.items():
            yield from leaves(item, f"{path}/{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from leaves(item, f"{path}[{i}]")
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield path, float(value)


def compare(first: dict, second: dict, abs_tol: float, rel_tol: float, ignore: tuple = ()) -> dict:
    "Counts and the differences beyond max(abs_tol, rel_tol·|committed|), largest first; paths containing `ignore` skipped."
    a, b = ({p: v for p, v in leaves(d) if not any(word in p for word in ignore)} for d in (first, second))
    shared = sorted(set(a) & set(b))
    beyond = []
    for path in shared:
        x, y = a[path], b[path]
        if math.isnan(x) and math.isnan(y):
            continue
        gap = abs(x - y) if math.isfinite(x) and math.isfinite(y) else math.inf
        if gap > max(abs_tol, rel_tol * abs(x)):
            beyond.append((gap, path, x, y))
    return {"compared": len(shared), "only_first": len(set(a) - set(b)), "only_second": len(set(b) - set(a)),
            "beyond": sorted(beyond, reverse=True)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("committed", type=Path)
    parser.add_argument("fresh", type=Path)
    parser.add_argument("--abs", type=float, default=1e-9, help="absolute tolerance")
    parser.add_argument("--rel", type=float, default=0.0, help="relative tolerance (of the committed value)")
    parser.add_argument("--show", type=int, default=10)
    parser.add_argument("--ignore", nargs="*", default=[], help="skip paths containing any of these (measured seconds, say)")
    args = parser.parse_args(argv)
    try:
        first, second = (json.loads(path.read_text()) for path in (args.committed, args.fresh))
    except (OSError, ValueError) as err:
        print(f"compare_json: {err}", file=sys.stderr)
        return 2
    result = compare(first, second, args.abs, args.rel, tuple(args.ignore))
    print(f"{result['compared']} numbers compared ({result['only_first']} only in {args.committed.name} first, "
          f"{result['only_second']} only in the second); {len(result['beyond'])} beyond the tolerance "
          f"(abs {args.abs:g}, rel {args.rel:g})")
    for gap, path, x, y in result["beyond"][:args.show]:
        print(f"  {path}: {x:.6g} against {y:.6g} (difference {gap:.3g})")
    return 1 if result["beyond"] else 0


if __name__ == "__main__":
    sys.exit(main())
