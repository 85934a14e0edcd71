#!/usr/bin/env python3
"""Why the planner's choice is not the simulated best, row by row.

Reads the CSV of `compass sweep --sim --csv F` and sorts every row whose choice simulates
slower than the simulated best (exact ties in simulated time are not misses) into:

- the tie rule: the model's fastest prediction IS the simulated best, but another strategy was
  predicted within the selector's tie tolerance (0.5%) and is simpler, so it was chosen;
- a wrong ranking: the model's fastest prediction is not the simulated best. These are grouped
  by (model's fastest, simulated best, operator) with each side's prediction error
  (predicted / simulated - 1), which says which estimate is off.

usage: tools/choice_misses.py SWEEP.csv [--top 10]
"""
import argparse
import collections
import csv
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", help="CSV written by compass sweep --sim --csv F")
    ap.add_argument("--top", type=int, default=10, help="groups of wrong rankings to list")
    a = ap.parse_args()
    try:
        with open(a.csv, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        print(f"choice_misses: {e}", file=sys.stderr)
        return 2
    if not rows or "sim_best" not in rows[0]:
        print(f"choice_misses: {a.csv} is not a sweep --sim CSV (no sim_best column)",
              file=sys.stderr)
        return 2
    strategies = [c[len("pred_"):-len("_s")] for c in rows[0] if c.startswith("pred_")]

    def t(row, kind, s):
        return float(row[f"{kind}_{s}_s"])

    def same(x, y):
        return abs(x - y) <= 1e-6 * y

    misses = [r for r in rows if not same(t(r, "sim", r["chosen"]), t(r, "sim", r["sim_best"]))]
    tie_rule, wrong = [], []
    for r in misses:
        fastest = min(strategies, key=lambda s: t(r, "pred", s))
        r["_fastest"] = fastest
        (tie_rule if same(t(r, "sim", fastest), t(r, "sim", r["sim_best"])) else wrong).append(r)

    def regrets(lst):
        return sorted(float(r["regret"]) for r in lst)

    def line(name, lst):
        g = regrets(lst)
        if not g:
            return f"{name}: 0 rows"
        return (f"{name}: {len(lst)} rows, regret median {100 * g[len(g) // 2]:.2f}% worst "
                f"{100 * g[-1]:.2f}%, {sum(x > 0.005 for x in g)} over 0.5%")

    print(f"{len(rows)} rows; the choice simulates slower than the best in {len(misses)}")
    print(line("tie rule (model's fastest = simulated best, a simpler strategy within 0.5% "
               "chosen)", tie_rule))
    print(line("wrong ranking (model's fastest != simulated best)", wrong))
    groups = collections.defaultdict(list)
    for r in wrong:
        groups[(r["_fastest"], r["sim_best"], r["op"])].append(r)
    for (fast, best, op), lst in sorted(groups.items(), key=lambda kv: -len(kv[1]))[:a.top]:
        e_fast = [t(r, "pred", fast) / t(r, "sim", fast) - 1 for r in lst]
        e_best = [t(r, "pred", best) / t(r, "sim", best) - 1 for r in lst]
        print(f"  {op}: model's fastest {fast} (error {100 * min(e_fast):+.1f}..{100 * max(e_fast):+.1f}%), "
              f"simulated best {best} (error {100 * min(e_best):+.1f}..{100 * max(e_best):+.1f}%): "
              f"{len(lst)} rows, worst regret {100 * max(float(r['regret']) for r in lst):.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
