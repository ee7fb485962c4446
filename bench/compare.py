#!/usr/bin/env python3
"""Compares a run of bench/run_all.sh with earlier ones and flags every ratio that fell.

    python3 bench/compare.py AFTER.json [BEFORE.json] [--last 3] [--tolerance 0.10] [--flagged-out FILE]

Without BEFORE, the baseline is the median, metric by metric, of the last N runs (--last N, default
3) recorded under bench/results/runs/ on a similar machine (the same CPU model string from
/proc/cpuinfo, run with the same thread count) and dated before AFTER: one run in which a peer
happened to be fast or slow does not set the bar. A metric's median is taken over those of the N
runs that measured it (a run that lacks it or failed it does not count); of two middle values, the
one less demanding of AFTER. With fewer than N such runs recorded, their median is the baseline (the
header says so; nothing is flagged for that alone). --last 1 compares with the last run alone, and
BEFORE with that one run. Prints each metric as baseline (median of k runs) -> after.

- ratio metrics (against a peer, or modelled and dimensionless) are compared with the baseline:
  one that moved the wrong way by more than the tolerance (relative; default 10%, or the metric's own
  where its RESULT line gives a wider one, for a figure measured to be that noisy) is flagged, and
  so is one the baseline had that this run lacks or failed to measure;
- own ratios (between two of dype's own paths, kind own_ratio) are printed against the baseline,
  but a fall is not flagged: making the denominator's path faster lowers them. A missed target is
  flagged;
- absolute metrics (times, rates) are never compared across runs (the machine's speed drifts):
  this run's value is printed (the earlier one as n/c) and checked against its target only;
- a metric whose definition changed gets a new name, and the old one is listed in RETIRED: the
  baseline's runs still carry it, and its absence is not flagged.

--flagged-out FILE writes one line "suite metric fell|missing|missed" per flagged metric (bench/run_all.sh
re-runs the suites of those that fell once before it calls a slip). Exit status: 0 nothing flagged
(or nothing to compare with), 1 something flagged, 2 bad input.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results import fmt, load_run, recorded_runs  # noqa: E402


# Metrics no longer measured, with why. Their names stay in the recorded runs.
RETIRED = {
    **{f"models.{f}_vs_torch_{w}": f"now {f}_vs_fastest_torch_{w}: the torch peer's fastest rep, not its median "
       "(the peer is bimodal on the 2-core VM)" for f in ("gcn", "sage", "gin") for w in ("gather", "csr")},
}


def previous_runs(after, last):
    """The last `last` recorded runs on the same CPU model with the same thread count, dated before
    `after` (not `after` itself), oldest first."""
    same = os.path.realpath(after["_path"])
    earlier = [r for r in recorded_runs(after.get("cpu_model"))
               if os.path.realpath(r["_path"]) != same and r.get("date", "") < after.get("date", "")
               and r.get("threads") == after.get("threads")]
    return earlier[-last:]


def median(values, higher):
    """The middle value; of an even number, the lower of the two middle ones where higher is better
    (the higher where lower is better), so that a ratio is flagged only if it fell against both: a
    mean of the two would let one outlying run set the bar."""
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else v[n // 2 - 1] if higher else v[n // 2]


def baseline(runs, ran):
    """Per metric of the suites in `ran`: (the metric as the latest of `runs` describes it, the median
    of its values over the runs that measured it or None, how many did)."""
    meta, values = {}, {}
    for run in runs:  # oldest first, so the latest run's description of a metric wins
        for m in run["metrics"]:
            if m["suite"] not in ran:
                continue
            meta[m["name"]] = m
            if m["status"] == "ok" and m["value"] is not None:
                values.setdefault(m["name"], []).append(m["value"])
    return {name: (m, median(values[name], m["higher_is_better"]) if name in values else None,
                   len(values.get(name, ())))
            for name, m in meta.items()}


def change(before, after, higher):
    """Relative change in the metric's good direction (negative: worse); None if not computable."""
    if before is None or after is None:
        return None
    if before == 0:
        return 0.0 if after == 0 else (1.0 if (after > 0) == higher else -1.0)
    rel = (after - before) / abs(before)
    return rel if higher else -rel


def compare(before_runs, after, tolerance):
    """Rows (name, kind, baseline, after, unit, note, runs in the baseline's median) and the flagged
    (suite, name, fell|missing|missed). `before_runs`: the runs whose per-metric median is the baseline."""
    ran = {s["name"] for s in after["suites"]}  # a run of some suites (--only) says nothing of the rest
    b = baseline(before_runs, ran)
    a = {m["name"]: m for m in after["metrics"]}
    rows, flagged = [], []
    for name in list(a) + [n for n in b if n not in a]:
        mb, vb, k = b.get(name, (None, None, 0))
        ma = a.get(name)
        m = ma or mb
        va = ma["value"] if ma and ma["status"] == "ok" else None
        note = ""
        if name in RETIRED and not ma:
            note = f"retired: {RETIRED[name]}"
        elif m["kind"] in ("ratio", "own_ratio"):
            own = m["kind"] == "own_ratio"
            if mb and vb is not None and va is None:
                note = "MISSING now (failed or not run)"
                flagged.append((m["suite"], name, "missing"))
            elif not mb:
                note = "new"
            else:
                c = change(vb, va, m["higher_is_better"])
                if c is not None:
                    note = f"{100 * c:+.1f}%"
                    allowed = max(tolerance, ma.get("tolerance") or 0.0) if ma else tolerance
                    if c < -allowed:
                        note += f"  FELL (> {100 * allowed:g}%)"
                        if own:
                            note += " (own paths: not flagged)"
                        else:
                            flagged.append((m["suite"], name, "fell"))
            if own and ma and ma["met"] is False:
                note += "  TARGET MISSED"
                flagged.append((m["suite"], name, "missed"))
                if ma and ma.get("rerun"):
                    note += f"  [re-run; first {fmt(ma.get('first_value'), m['unit'])}]"
        else:
            vb, k = None, 0  # never compared across runs: the earlier value is not shown
            if ma and ma["status"] != "ok":
                note = "FAILED"
            elif ma and ma["met"] is False:
                note = "target missed in this run"
            elif ma and ma["met"]:
                note = "target met in this run"
            else:
                note = "(absolute: not compared across runs)"
        rows.append((name, m["kind"], vb, va, m["unit"], note, k))
    return rows, flagged


def describe(run):
    return f"{run['_path']} ({run['date']}, {run['git_commit'][:10]}, {run['host']})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("after")
    ap.add_argument("before", nargs="?")
    ap.add_argument("--last", type=int, default=None, metavar="N",
                    help="baseline: the per-metric median of the last N recorded runs (default 3)")
    ap.add_argument("--tolerance", type=float, default=0.10, help="relative fall that flags a ratio (0.10: 10%%)")
    ap.add_argument("--flagged-out", default="", help="write 'suite metric fell|missing|missed' per flagged metric here")
    args = ap.parse_args()
    if args.before and args.last is not None:
        ap.error("BEFORE and --last exclude each other")
    last = 3 if args.last is None else args.last
    if last < 1:
        ap.error("--last must be at least 1")
    try:
        after = load_run(args.after)
        before_runs = [load_run(args.before)] if args.before else previous_runs(after, last)
    except (OSError, ValueError, KeyError) as e:
        print(f"compare: {e}", file=sys.stderr)
        return 2
    if args.flagged_out:
        open(args.flagged_out, "w").close()
    if not before_runs:
        print(f"compare: no earlier run recorded on CPU model '{after.get('cpu_model')}' with {after.get('threads')} "
              "threads: nothing to compare with")
        return 0
    # One run (BEFORE, or --last 1) is printed as it always was; a median says which runs made it.
    several = not args.before and last > 1
    if args.before and before_runs[0].get("cpu_model") != after.get("cpu_model"):
        print(f"compare: note: CPU models differ ('{before_runs[0].get('cpu_model')}' -> '{after.get('cpu_model')}')")
    print(f"compare: {args.after} ({after['date']}, {after['git_commit'][:10]}, {after['host']})")
    if not several:
        print(f"   with: {describe(before_runs[0])}")
    else:
        n = len(before_runs)
        which = f"the last {n} runs" if n == last else f"the {n} runs" if n > 1 else "the one run"
        short = f" (fewer than --last {last}; nothing is flagged for that)" if n < last else ""
        print(f"   with: the median, metric by metric, of {which} recorded on this CPU model with "
              f"{after.get('threads')} threads{short}:")
        for run in before_runs:
            print(f"         {describe(run)}")
    print(f"   CPU {after.get('cpu_model')}; ratios flagged when they fall by more than {100 * args.tolerance:g}%")
    rows, flagged = compare(before_runs, after, args.tolerance)
    width = max(len(r[0]) for r in rows) if rows else 10
    for name, kind, vb, va, unit, note, k in rows:
        flag = "!!" if any(name == f[1] for f in flagged) else "  "
        before_text = fmt(vb, unit) if kind in ("ratio", "own_ratio") else "n/c"
        if several:
            runs_text = "" if kind not in ("ratio", "own_ratio") or vb is None else "(1 run)" if k == 1 else f"(median of {k} runs)"
            before_text = f"{before_text:>12} {runs_text:<18}"
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
        print(f"FLAGGED: {len(flagged)} ratio(s) fell by more than {100 * args.tolerance:g}%, went missing or "
              "(own ratios) missed their target: "
              + ", ".join(n for _, n, _ in flagged))
        return 1
    print(f"no ratio fell by more than {100 * args.tolerance:g}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
