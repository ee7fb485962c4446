#!/usr/bin/env python3
"""Compares a run of bench/run_all.sh with an earlier one and flags every ratio that fell.

    python3 bench/compare.py AFTER.json [BEFORE.json] [--tolerance 0.10] [--flagged-out FILE]

Without BEFORE, the last run recorded under bench/results/runs/ on a similar machine (the same CPU
model string from /proc/cpuinfo, run with the same thread count) and dated before AFTER. Prints each metric before -> after.

- ratio metrics (against a peer, or modelled and dimensionless) are compared across the two runs:
  one that moved the wrong way by more than the tolerance (relative; default 10%) is flagged, and
  so is one the earlier run had that this run lacks or failed to measure;
- absolute metrics (times, rates) are never compared across runs (the machine's speed drifts):
  this run's value is printed (the earlier one as n/c) and checked against its target only.

--flagged-out FILE writes one line "suite metric fell|missing" per flagged metric (bench/run_all.sh
re-runs the suites of those that fell once before it calls a slip). Exit status: 0 nothing flagged
(or nothing to compare with), 1 something flagged, 2 bad input.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results import fmt, load_run, recorded_runs  # noqa: E402


def previous_run(after):
    """The last recorded run on the same CPU model with the same thread count, dated before `after`
    (not `after` itself)."""
    same = os.path.realpath(after["_path"])
    earlier = [r for r in recorded_runs(after.get("cpu_model"))
               if os.path.realpath(r["_path"]) != same and r.get("date", "") < after.get("date", "")
               and r.get("threads") == after.get("threads")]
    return earlier[-1] if earlier else None


def change(before, after, higher):
    """Relative change in the metric's good direction (negative: worse); None if not computable."""
    if before is None or after is None:
        return None
    if before == 0:
        return 0.0 if after == 0 else (1.0 if (after > 0) == higher else -1.0)
    rel = (after - before) / abs(before)
    return rel if higher else -rel


def compare(before, after, tolerance):
    """Rows (name, kind, before, after, unit, note) and the flagged (suite, name, fell|missing)."""
    ran = {s["name"] for s in after["suites"]}  # a run of some suites (--only) says nothing of the rest
    b = {m["name"]: m for m in before["metrics"] if m["suite"] in ran}
    a = {m["name"]: m for m in after["metrics"]}
    rows, flagged = [], []
    for name in list(a) + [n for n in b if n not in a]:
        mb, ma = b.get(name), a.get(name)
        m = ma or mb
        vb = mb["value"] if mb else None
        va = ma["value"] if ma and ma["status"] == "ok" else None
        note = ""
        if m["kind"] == "ratio":
            if mb and vb is not None and va is None:
                note = "MISSING now (failed or not run)"
                flagged.append((m["suite"], name, "missing"))
            elif not mb:
                note = "new"
            else:
                c = change(vb, va, m["higher_is_better"])
                if c is not None:
                    note = f"{100 * c:+.1f}%"
                    if c < -tolerance:
                        note += f"  FELL (> {100 * tolerance:g}%)"
                        flagged.append((m["suite"], name, "fell"))
                if ma and ma.get("rerun"):
                    note += f"  [re-run; first {fmt(ma.get('first_value'), m['unit'])}]"
        else:
            vb = None  # never compared across runs: the earlier value is not shown
            if ma and ma["status"] != "ok":
                note = "FAILED"
            elif ma and ma["met"] is False:
                note = "target missed in this run"
            elif ma and ma["met"]:
                note = "target met in this run"
            else:
                note = "(absolute: not compared across runs)"
        rows.append((name, m["kind"], vb, va, m["unit"], note))
    return rows, flagged


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("after")
    ap.add_argument("before", nargs="?")
    ap.add_argument("--tolerance", type=float, default=0.10, help="relative fall that flags a ratio (0.10: 10%%)")
    ap.add_argument("--flagged-out", default="", help="write 'suite metric fell|missing' per flagged metric here")
    args = ap.parse_args()
    try:
        after = load_run(args.after)
        before = load_run(args.before) if args.before else previous_run(after)
    except (OSError, ValueError, KeyError) as e:
        print(f"compare: {e}", file=sys.stderr)
        return 2
    if args.flagged_out:
        open(args.flagged_out, "w").close()
    if before is None:
        print(f"compare: no earlier run recorded on CPU model '{after.get('cpu_model')}' with {after.get('threads')} "
              "threads: nothing to compare with")
        return 0
    if before.get("cpu_model") != after.get("cpu_model"):
        print(f"compare: note: CPU models differ ('{before.get('cpu_model')}' -> '{after.get('cpu_model')}')")
    print(f"compare: {args.after} ({after['date']}, {after['git_commit'][:10]}, {after['host']})")
    print(f"   with: {before['_path']} ({before['date']}, {before['git_commit'][:10]}, {before['host']})")
    print(f"   CPU {after.get('cpu_model')}; ratios flagged when they fall by more than {100 * args.tolerance:g}%")
    rows, flagged = compare(before, after, args.tolerance)
    width = max(len(r[0]) for r in rows) if rows else 10
    for name, kind, vb, va, unit, note in rows:
        flag = "!!" if any(name == f[1] for f in flagged) else "  "
        before_text = fmt(vb, unit) if kind == "ratio" else "n/c"
        print(f"{flag} {name:<{width}}  {kind:<8}  {before_text:>12} -> {fmt(va, unit):<12}  {note}")
    missed = [m["name"] for m in after["metrics"] if m["met"] is False]
    if missed:
        print(f"targets missed in this run: {', '.join(missed)}")
    failed = [s["name"] for s in after["suites"] if s["status"].startswith("failed")]
    if failed:
        print(f"failed benchmarks in this run: {', '.join(failed)}")
    if args.flagged_out:
        with open(args.flagged_out, "w") as f:
            for suite, name, why in flagged:
                f.write(f"{suite} {name} {why}\n")
    if flagged:
        print(f"FLAGGED: {len(flagged)} ratio(s) fell by more than {100 * args.tolerance:g}% or went missing: "
              + ", ".join(n for _, n, _ in flagged))
        return 1
    print(f"no ratio fell by more than {100 * args.tolerance:g}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
