#!/usr/bin/env python3
"""The recorded benchmark runs of bench/run_all.sh: one JSON per run under bench/results/runs/.

    results.py extract scheduler|runtime|prediction|daemon_http FILE
        RESULT lines from a benchmark's own JSON output (Google Benchmark's --benchmark_out for
        bench_scheduler; --json of bench_runtime, bench_prediction, bench_daemon_http).
    results.py record --logs DIR --suites FILE --out RUN.json [--notes TEXT] [--threads N]
                      [--started ISO] [--seconds S] [--load-start L] [--load-end L] [--reruns FILE]
        One run's JSON from the suites' logs: every "RESULT name=.. value=.. unit=.. kind=..
        better=.. peer=.. target=.." line of DIR/<suite>.log, each suite's exit status (FILE: lines
        "suite rc seconds basis"), the machine, and the commit and changed files noted in
        DIR/git-head.txt and DIR/git-status.txt when the run started. With --reruns (lines "suite metric"), each listed
        metric takes its value from DIR/<suite>.rerun.log and keeps the first as first_value.
    results.py table RUN.json [--md docs/benchmarks.md] [--plot docs/benchmarks-history.png]
        The run's table as Markdown (stdout, or --md), and with --plot each ratio metric over the
        recorded runs on the same CPU model (matplotlib).

A metric's kind is "ratio" (against a peer, or modelled and dimensionless: comparable across runs
on the same CPU model), "own_ratio" (between two of dype's own paths in one run, such as one edge
against a whole-graph request: it moves when either path does, so a fall is shown but the metric
answers to its target) or "absolute" (a time or rate of this run: checked against its target within
the run only). bench/compare.py compares a run with the per-metric median of the last 3 recorded on
the same CPU model.
"""
import argparse
import datetime
import glob
import json
import os
import platform
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNS_DIR = os.path.join(ROOT, "bench", "results", "runs")
SCHEMA = 1


# ---- RESULT lines -------------------------------------------------------------------------------

def result_line(name, value, unit, kind, better="higher", peer="-", target="-", basis=""):
    """One RESULT line; value None is written as "missing" (recorded as a failed metric)."""
    v = "missing" if value is None else f"{value:.6g}"
    return (f"RESULT name={name} value={v} unit={unit} kind={kind} better={better} peer={peer} target={target}"
            + (f" basis={basis}" if basis else ""))


def parse_results(path):
    """The RESULT lines of a log as dicts (fields as written); a missing log gives none."""
    out = []
    if not os.path.exists(path):
        return out
    with open(path, errors="replace") as f:
        for line in f:
            line = line.strip()
            if not line.startswith("RESULT "):
                continue
            fields = dict(tok.split("=", 1) for tok in line.split()[1:] if "=" in tok)
            if "name" in fields:
                out.append(fields)
    return out


def number(text):
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return v if v == v and abs(v) != float("inf") else None


# ---- extract: a benchmark's own JSON -> RESULT lines ------------------------------------------

# bench_scheduler's cases (Google Benchmark run names) -> metric name and target (in the case's
# unit; None: no target). The header of bench/bench_scheduler.cpp states the targets.
SCHEDULER = {
    "BM_GcnS1Planning/0": ("gcn_s1_default_solve", 100.0),
    "BM_GcnS1Planning/1": ("gcn_s1_flat_loaded_solve", None),
    "BM_GcnPaperSystem/0": ("gcn_products_perf_solve", 50.0),
    "BM_GcnPaperSystem/1": ("gcn_products_energy_solve", 50.0),
    "BM_GcnPaperSystem/2": ("gcn_products_balanced_solve", 50.0),
    "BM_GinPaperSystem/0": ("gin_products_perf_solve", None),
    "BM_GinPaperSystem/2": ("gin_products_balanced_solve", None),
    "BM_GcnPaperSystemPaperSolver": ("gcn_products_paper_solver_solve", None),
    "BM_Transformer32Layers/0": ("transformer32_perf_solve", 20.0),
    "BM_Transformer32Layers/1": ("transformer32_energy_solve", 20.0),
    "BM_Transformer32Layers/2": ("transformer32_balanced_solve", 20.0),
    "BM_Gcn64Kernels3x8/0": ("gcn64k_3x8_perf_solve", 1000.0),
    "BM_Gcn64Kernels3x8/1": ("gcn64k_3x8_energy_solve", 1000.0),
    "BM_Gcn64Kernels3x8/2": ("gcn64k_3x8_balanced_solve", 1000.0),
}


def extract_scheduler(data):
    lines = []
    for b in data.get("benchmarks", []):
        if b.get("aggregate_name") != "median":
            continue
        run = b["run_name"]
        key = re.sub(r"/(iterations|repeats|real_time|min_time):[^/]*", "", run)
        name, target = SCHEDULER.get(key, (re.sub(r"[^A-Za-z0-9]+", "_", key).strip("_").lower(), None))
        unit = b.get("time_unit", "ns")
        lines.append(result_line(f"{name}_{unit}", b["real_time"], unit, "absolute", "lower",
                                 "-", "-" if target is None else f"{target:g}"))
    for key in ("BM_GcnS1Planning/0", "BM_GcnS1Planning/1"):
        name, target = SCHEDULER[key]
        if not any(line.startswith(f"RESULT name={name}_") for line in lines):
            # Asked for, not measured: recorded as failed rather than left out.
            print(f"extract scheduler: no {key} in bench_scheduler's output", file=sys.stderr)
            lines.append(result_line(f"{name}_us", None, "us", "absolute", "lower", "-",
                                     "-" if target is None else f"{target:g}"))
    return lines


def extract_runtime(data):
    d = data["drift"]
    lines = [
        result_line("drift_dynamic_vs_static", d["dynamic_over_static_modelled"], "x", "ratio", peer="static",
                    target="1.3", basis="modelled"),
        result_line("drift_dynamic_vs_oracle", d["dynamic_over_oracle_modelled"], "x", "ratio", peer="oracle",
                    target="0.95", basis="modelled"),
        result_line("drift_oracle_vs_static", d["oracle_over_static_modelled"], "x", "ratio", peer="static",
                    basis="modelled"),
    ]
    if "orders_geomean_dynamic_over_static_modelled" in d:
        lines.append(result_line("drift_orders_geomean_dynamic_vs_static", d["orders_geomean_dynamic_over_static_modelled"],
                                 "x", "ratio", peer="static", basis="modelled"))
    if "overhead" in data:
        o = data["overhead"]
        lines.append(result_line("engine_overhead_us", o["overhead_us_measured"], "us", "absolute", "lower",
                                 peer="direct-call", target="50", basis="measured"))
        if "thread_round_trip_us_measured" in o:
            lines.append(result_line("engine_overhead_vs_thread_round_trip",
                                     o["overhead_us_measured"] / o["thread_round_trip_us_measured"], "x", "ratio",
                                     "lower", peer="thread-round-trip", basis="measured"))
    return lines


def extract_prediction(data):
    return [
        result_line("plans_within_5pct", 100.0 * data["within_5pct_share"], "%", "ratio", target="100"),
        result_line("worst_abs_error", 100.0 * data["worst_abs_error"], "%", "ratio", "lower", target="5"),
    ]


def extract_daemon_http(data):
    lines = []
    for key, v in sorted(data.get("overhead", {}).items()):
        if not isinstance(v, dict):
            continue
        # The target (README, issue 6) is for a registered graph; a whole graph per request also
        # validates and normalises the graph in the server.
        target = f"{v.get('target_overhead_us', 100):g}" if key == "registered_graph" else "-"
        lines += [
            result_line(f"http_{key}_overhead_us", v["overhead_us_median"], "us", "absolute", "lower",
                        peer="engine-time", target=target),
            result_line(f"http_{key}_server_cpu_us", v["server_cpu_us_median"], "us", "absolute", "lower",
                        target=target),
            result_line(f"http_{key}_client_rtt_us", v["client_rtt_us_median"], "us", "absolute", "lower"),
            result_line(f"http_{key}_engine_share", v["engine_us_median"] / v["client_rtt_us_median"], "x",
                        "own_ratio", peer="client-rtt"),
        ]
    return lines


def cmd_extract(args):
    with open(args.file) as f:
        data = json.load(f)
    fn = {"scheduler": extract_scheduler, "runtime": extract_runtime, "prediction": extract_prediction,
          "daemon_http": extract_daemon_http}[args.kind]
    lines = fn(data)
    for line in lines:
        print(line)
    return 0 if lines else 1


# ---- record ---------------------------------------------------------------------------------------

def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def git(*a):
    try:
        return subprocess.run(["git", "-C", ROOT, *a], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return ""


def git_state(logs):
    """The commit and the tracked files changed in the tree: as run_all.sh noted them when the run
    started (DIR/git-head.txt, DIR/git-status.txt; others may commit while it runs), else now."""
    head_file, status_file = os.path.join(logs, "git-head.txt"), os.path.join(logs, "git-status.txt")
    if os.path.exists(head_file) and os.path.exists(status_file):
        with open(head_file) as f:
            head = f.read().strip()
        with open(status_file) as f:
            status = f.read()
    else:
        head, status = git("rev-parse", "HEAD").strip(), git("status", "--porcelain", "--untracked-files=no")
    return head, [line[3:] for line in status.splitlines() if len(line) > 3]


def met(value, target, higher):
    if value is None or target is None:
        return None
    return value >= target if higher else value <= target


def metric_of(suite, basis, fields):
    value = number(fields.get("value"))
    target = number(fields.get("target"))
    higher = fields.get("better", "higher") != "lower"
    peer = fields.get("peer", "-")
    return {
        "name": f"{suite}.{fields['name']}",
        "suite": suite,
        "value": value,
        "unit": fields.get("unit", ""),
        "kind": fields.get("kind", "absolute"),
        "higher_is_better": higher,
        "peer": None if peer in ("", "-") else peer,
        "target": target,
        "met": met(value, target, higher),
        "basis": fields.get("basis", basis),
        # A wider fall than the run's tolerance that this metric may show from noise alone (its
        # RESULT line says so, with the spread measured), or None.
        "tolerance": number(fields.get("tolerance")),
        "status": "ok" if value is not None else "failed",
    }


def cmd_record(args):
    suites, metrics = [], []
    reruns = {}
    if args.reruns and os.path.exists(args.reruns):
        with open(args.reruns) as f:
            for line in f:
                parts = line.split()[:2]
                if len(parts) == 2:
                    reruns.setdefault(parts[0], set()).add(parts[1])
    with open(args.suites) as f:
        rows = [line.split() for line in f if line.strip()]
    for suite, rc, seconds, basis in rows:
        rc = int(rc)
        log = os.path.join(args.logs, f"{suite}.log")
        found = [metric_of(suite, basis, r) for r in parse_results(log)]
        again = {f"{suite}.{r['name']}": metric_of(suite, basis, r)
                 for r in parse_results(os.path.join(args.logs, f"{suite}.rerun.log"))}
        for m in found:
            if m["name"] in reruns.get(suite, ()):
                m["first_value"] = m["value"]
                m["rerun"] = True
                fresh = again.get(m["name"])
                m["value"] = fresh["value"] if fresh else None
                m["met"] = met(m["value"], m["target"], m["higher_is_better"])
                m["status"] = "ok" if m["value"] is not None else "failed"
        missed = any(m["met"] is False for m in found)
        bad = any(m["status"] != "ok" for m in found)
        if rc == 0 and found and not bad:
            status = "ok"
        elif rc == 124:
            status = "failed (timed out)"
        elif rc == 125:
            status = "failed (not run: the build failed)"
        elif found and not bad and missed:
            status = "targets missed"  # the script's non-zero exit is its missed targets
        elif rc:
            status = f"failed (exit {rc})"
        elif found:
            status = "failed (not measured: " + ", ".join(m["name"] for m in found if m["status"] != "ok") + ")"
        else:
            status = "failed (no results)"
        suites.append({"name": suite, "status": status, "exit_code": rc, "seconds": float(seconds),
                       "basis": basis, "metrics": len(found), "log": os.path.relpath(log, ROOT)})
        metrics += found
    head, changed = git_state(args.logs)
    load_end = args.load_end or " ".join(open("/proc/loadavg").read().split()[:3])
    run = {
        "schema": SCHEMA,
        "host": platform.node(),
        "cpu_model": cpu_model(),
        "cpus": os.cpu_count(),
        "threads": args.threads,
        "date": args.started or datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": head,
        "git_dirty": bool(changed),
        # Tracked files that differed from the commit when the run started (a shared tree).
        "git_changed_paths": changed,
        "notes": args.notes,
        "duration_s": args.seconds,
        "load_average": {"start": args.load_start, "end": load_end},
        "suites": suites,
        "metrics": metrics,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(run, f, indent=1)
        f.write("\n")
    failed = [s["name"] for s in suites if s["status"].startswith("failed")]
    print(f"recorded {len(metrics)} metrics of {len(suites)} suites in {args.out}"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


# ---- runs on disk -------------------------------------------------------------------------------

def load_run(path):
    with open(path) as f:
        run = json.load(f)
    run["_path"] = path
    return run


def recorded_runs(cpu=None, directory=RUNS_DIR):
    """Every recorded run (optionally of one CPU model string), oldest first."""
    runs = []
    for path in glob.glob(os.path.join(directory, "*.json")):
        try:
            run = load_run(path)
        except (OSError, ValueError):
            continue
        if run.get("schema") == SCHEMA and (cpu is None or run.get("cpu_model") == cpu):
            runs.append(run)
    return sorted(runs, key=lambda r: (r.get("date", ""), r["_path"]))


def fmt(v, unit=""):
    if v is None:
        return "-"
    a = abs(v)
    s = f"{v:.3g}" if a < 10 or a >= 1e5 else f"{v:.1f}" if a < 1000 else f"{v:.0f}"
    if unit == "x":
        return s + "x"
    return f"{s} {unit}".strip() if unit else s


# ---- table --------------------------------------------------------------------------------------

def markdown(run, plot_name=None):
    out = []
    w = out.append
    w("# Benchmarks")
    w("")
    w("<!-- Generated by bench/results.py table from the latest run bench/run_all.sh recorded; do not edit. -->")
    w("")
    w("The latest run of `bench/run_all.sh` (every benchmark that prints a ratio against a peer or a "
      "target), from `" + os.path.relpath(run["_path"], ROOT) + "`. `bench/compare.py` compares a run with "
      "the median, metric by metric, of the last 3 recorded on the same CPU model and thread count "
      "(so that one run whose peer happened to be fast or slow does not set the bar) and flags every "
      "ratio that fell by more than the tolerance; absolute times are checked against their targets "
      "within a run only.")
    w("")
    w(f"- machine: `{run['host']}`, CPU `{run['cpu_model']}` ({run['cpus']} CPUs), {run['threads']} threads")
    changed = run.get("git_changed_paths") or []
    w(f"- date: {run['date']}, commit `{run['git_commit'][:12]}`"
      + (f" with local changes to {', '.join(f'`{p}`' for p in changed)}" if changed else
         " (with local changes)" if run.get("git_dirty") else ""))
    dur = run.get("duration_s")
    w(f"- duration: {dur / 60:.1f} min; load average at start {run['load_average']['start']}, at end "
      f"{run['load_average']['end']}" if dur else "- duration: unknown")
    if run.get("notes"):
        w(f"- notes: {run['notes']}")
    w("")
    w("Kinds: **ratio** against a peer (or a modelled, dimensionless figure), compared across runs; "
      "**own_ratio** between two of dype's own paths (one edge against a whole-graph request, a client's "
      "p50 against the engine in process), shown against earlier runs but held to its target only, since "
      "speeding up either path moves it; **absolute** a time or rate of this run, checked against its "
      "target only. A peer measured several times counts by its fastest rep where the name says "
      "`fastest` (torch's CPU SpMM is bimodal on this VM). A ratio whose RESULT line gives its own "
      "tolerance (a spread measured across runs on unchanged code) is flagged past that instead of "
      "the run's. Basis: measured on this CPU, or modelled (emulated devices, virtual clock).")
    w("")
    w("| suite | status | metrics | seconds | basis |")
    w("| --- | --- | ---: | ---: | --- |")
    for s in run["suites"]:
        w(f"| {s['name']} | {s['status']} | {s['metrics']} | {s['seconds']:.0f} | {s['basis']} |")
    w("")
    w("| metric | value | peer | target | met | kind | basis |")
    w("| --- | ---: | --- | --- | --- | --- | --- |")
    for m in run["metrics"]:
        target = "-"
        if m["target"] is not None:
            target = ("≥ " if m["higher_is_better"] else "≤ ") + f"{m['target']:g}" + (
                "x" if m["unit"] == "x" else f" {m['unit']}")
        verdict = {True: "yes", False: "**no**", None: "-"}[m["met"]]
        value = fmt(m["value"], m["unit"]) if m["status"] == "ok" else "**failed**"
        if m.get("rerun"):
            value += f" (re-run; first {fmt(m.get('first_value'), m['unit'])})"
        w(f"| {m['name']} | {value} | {m['peer'] or '-'} | {target} | {verdict} | {m['kind']} | {m['basis']} |")
    failed = [s for s in run["suites"] if s["status"].startswith("failed")]
    if failed:
        w("")
        w("Failed: " + ", ".join(f"{s['name']} ({s['status']}, log `{s['log']}`)" for s in failed) + ".")
    if plot_name:
        w("")
        w(f"Each ratio over the runs recorded on `{run['cpu_model']}` (dashed: target):")
        w("")
        w(f"![ratios over recorded runs]({plot_name})")
    w("")
    w("Run it: `bash bench/run_all.sh` (about 10 minutes on 2 cores; `--help` for options). Compare "
      "a run with the recorded ones: `python3 bench/compare.py NEW.json [--last N]` (median of the last N, "
      "default 3), or with one: `python3 bench/compare.py NEW.json OLD.json`.")
    return "\n".join(out) + "\n"


def plot(runs, path):
    try:
        import matplotlib
    except ImportError:  # Debian's python3-matplotlib is in /usr/bin/python3 (a pyenv python may lack it)
        print(f"results: no matplotlib in {sys.executable}: {path} not drawn", file=sys.stderr)
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = []
    for r in runs:
        for m in r["metrics"]:
            if m["kind"] in ("ratio", "own_ratio") and m["name"] not in names:
                names.append(m["name"])
    if not names:
        return False
    cols = 4
    rows = (len(names) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 2.4 * rows), squeeze=False)
    labels = [r["date"][:16].replace("T", " ") for r in runs]
    for ax, name in zip(axes.flat, names):
        xs, ys, target = [], [], None
        for i, r in enumerate(runs):
            for m in r["metrics"]:
                if m["name"] == name and m["value"] is not None:
                    xs.append(i)
                    ys.append(m["value"])
                    target = m["target"] if m["target"] is not None else target
        ax.plot(xs, ys, marker="o")
        if target is not None:
            ax.axhline(target, linestyle="--", color="grey", linewidth=1)
        ax.set_title(name, fontsize=8)
        step = max(1, (len(runs) + 7) // 8)  # at most ~8 dates on the axis
        ax.set_xticks(range(0, len(runs), step))
        ax.set_xticklabels(labels[::step], rotation=30, ha="right", fontsize=6)
        ax.tick_params(axis="y", labelsize=7)
        ax.set_xlim(-0.5, len(runs) - 0.5)
    for ax in list(axes.flat)[len(names):]:
        ax.set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=72)
    plt.close(fig)
    return True


def cmd_table(args):
    run = load_run(args.run)
    for path in (args.md, args.plot):
        if path:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    plot_name = None
    if args.plot:
        runs = recorded_runs(run["cpu_model"])
        # Compared as real paths: a RUN given relative to the working folder is still a recorded one.
        if not any(os.path.realpath(r["_path"]) == os.path.realpath(run["_path"]) for r in runs):
            runs.append(run)
        if plot(runs, args.plot):
            plot_name = os.path.relpath(args.plot, os.path.dirname(os.path.abspath(args.md)) if args.md else ".")
    text = markdown(run, plot_name)
    if args.md:
        with open(args.md, "w") as f:
            f.write(text)
        print(f"wrote {args.md}" + (f" and {args.plot}" if plot_name else ""))
    else:
        sys.stdout.write(text)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("extract")
    e.add_argument("kind", choices=["scheduler", "runtime", "prediction", "daemon_http"])
    e.add_argument("file")
    r = sub.add_parser("record")
    r.add_argument("--logs", required=True)
    r.add_argument("--suites", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--notes", default="")
    r.add_argument("--threads", type=int, default=2)
    r.add_argument("--started", default="")
    r.add_argument("--seconds", type=float, default=None)
    r.add_argument("--load-start", default="")
    r.add_argument("--load-end", default="", help="default: now")
    r.add_argument("--reruns", default="")
    t = sub.add_parser("table")
    t.add_argument("run")
    t.add_argument("--md", default="")
    t.add_argument("--plot", default="")
    args = ap.parse_args()
    return {"extract": cmd_extract, "record": cmd_record, "table": cmd_table}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
