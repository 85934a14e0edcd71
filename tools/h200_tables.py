#!/usr/bin/env python3
"""Prints the markdown tables of docs/results.md's H200 section from the committed device-check
data (docs/data/h200/): calibration summary, the GEMM efficiency when split into d parts along M,
and the virtual-rank runs (events vs flags).

Usage: python3 tools/h200_tables.py [docs/data/h200]
"""
import json
import sys
from pathlib import Path


def main() -> int:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/data/h200")
    try:
        cal = json.loads((root / "calibrate.json").read_text())
        runs = json.loads((root / "runs.json").read_text())
    except (OSError, json.JSONDecodeError) as e:
        print(f"h200_tables: cannot read {root}: {e}", file=sys.stderr)
        return 2

    print("| quantity | measured |")
    print("|---|---|")
    print(f"| best BF16 GEMM (cuBLASLt, table max) | {cal['best_bf16_flops'] / 1e12:.1f} TFLOP/s |")
    big = [g for g in cal["gemm"] if g["m"] == g["n"] == g["k"] == 8192]
    for g in big:
        print(f"| BF16 GEMM 8192^3 | {g['time_s'] * 1e3:.3f} ms = {g['tflops']:.1f} TFLOP/s |")
    print(f"| device-to-device copy (cudaMemcpyAsync 512 MiB) | "
          f"{cal['copy_bandwidth_bytes_per_s'] / 1e9:.1f} GB/s copied |")
    print(f"| GEMM slowdown beside copy-engine copies | {cal['gemm_slowdown_copy_engine']:.3f}x |")
    print(f"| GEMM slowdown beside a 16-block SM copy | {cal['gemm_slowdown_sm_copy']:.3f}x |")
    print(f"| copy slowdown beside GEMMs | {cal['comm_slowdown_beside_gemm']:.3f}x |")
    print(f"| kernel / copy issue cost (back to back) | {cal['kernel_launch_s'] * 1e6:.2f} us / "
          f"{cal['copy_launch_s'] * 1e6:.2f} us |")
    print()

    # Efficiency of splitting a GEMM of M rows into d GEMMs of M/d rows: time(M) / (d * time(M/d)).
    table = {(g["m"], g["n"], g["k"]): g["time_s"] for g in cal["gemm"]}
    print("| n | k | M | d=1 TFLOP/s | d=2 | d=4 | d=8 |")
    print("|---|---|---|---|---|---|---|")
    nks = sorted({(n, k) for (_, n, k) in table})
    for n, k in nks:
        for m in (4096, 16384):
            if (m, n, k) not in table:
                continue
            t1 = table[(m, n, k)]
            cells = [f"{2 * m * n * k / t1 / 1e12:.0f}"]
            for d in (2, 4, 8):
                td = table.get((m // d, n, k))
                cells.append(f"{t1 / (d * td):.2f}" if td else "-")
            print(f"| {n} | {k} | {m} | " + " | ".join(cells) + " |")
    print()

    print("| op | strategy | events median | flags median | check (max rel err) |")
    print("|---|---|---|---|---|")
    by = {}
    for r in runs:
        o = r["output"]
        if not o:
            continue
        for e in o["results"]:
            by.setdefault((o["op"]["kind"], e["strategy"]), {})[o.get("sync", "events")] = e
    for (op, st), v in by.items():
        ev, fl = v.get("events"), v.get("flags")
        err = max(x["check"]["max_rel_error"] for x in v.values())
        ok = all(x["check"]["pass"] for x in v.values())
        print(f"| {op} | {st} | {ev['median_s'] * 1e3:.3f} ms | {fl['median_s'] * 1e3:.3f} ms | "
              f"{err:.2e} {'PASS' if ok else 'FAIL'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
