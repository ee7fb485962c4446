#!/usr/bin/env bash
# Side-by-side: dype's CPU SpMM and GEMM vs their peers, same inputs, explicit thread counts.
#   SpMM 100k x 100k, 2M nnz (uniform and R-MAT), 128 features: vs PyTorch torch.mm on a CSR
#        tensor (target >= 3x) and vs Eigen 3.4 in the same process (target >= 1.3x); prints the
#        gathered GB/s next to the machine's DRAM read bandwidth (streaming sum over 1 GiB).
#   GEMM 100000 x 128 x 128: without epilogue vs dnnl_sgemm (like for like, target >= 0.95x; the fused
#        bias+ReLU GEMM is printed beside it) and with bias+ReLU vs Eigen with bias+ReLU (>= 1.3x);
#        torch addmm+relu printed for information.
# All figures are measured (medians of REPS repetitions). Build: release preset, its own build dir.
#
#   bench/run_kernel_peers.sh [BUILD_DIR]        (default build/kernel-peers)
#   Env: THREADS (2), REPS (7), NO_BUILD=1 (use BUILD_DIR's binaries as they are)
# Besides the prose, each figure is one line "RESULT name=.. value=.. unit=.. kind=ratio|absolute
# better=higher|lower peer=.. target=.." (bench/run_all.sh collects them).
# Exits non-zero if a peer is missing (never skips one silently) or a target is missed.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/peer_env.sh
source "$root/bench/peer_env.sh"
peer_args build/kernel-peers 7 "$@"
torch_python run_kernel_peers

if [[ "${NO_BUILD:-0}" != 1 ]]; then
  echo "== building bench_spmm bench_gemm (release) in $build"
  cmake --preset release -B "$build" >/dev/null
  cmake --build "$build" -j2 --target bench_spmm bench_gemm >/dev/null
fi

# Every threading runtime pinned to the same count: oneTBB via --threads, OpenMP (oneDNN sgemm,
# torch), OpenBLAS (torch's BLAS).
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads MKL_NUM_THREADS=$threads
echo "== threads: oneTBB=$threads OMP_NUM_THREADS=$OMP_NUM_THREADS" \
     "OPENBLAS_NUM_THREADS=$OPENBLAS_NUM_THREADS torch.set_num_threads($threads); reps=$reps"
echo "   $(uptime)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gbench=(--benchmark_repetitions="$reps" --benchmark_report_aggregates_only=true
        --benchmark_format=json)

# The panel-width sweep (BM_spmm_dype_panel) is for tuning, not part of the comparison.
"$build/bench/bench_spmm" --threads="$threads" --dump_dir="$tmp" "${gbench[@]}" \
  --benchmark_filter='BM_spmm_dype/|BM_spmm_eigen|BM_dram_read' >"$tmp/spmm.json"
for name in uniform rmat; do
  "$python" "$root/bench/peers/spmm_torch.py" "$tmp" "$name" "$threads" "$reps" | tee "$tmp/torch_$name.txt"
done
"$build/bench/bench_gemm" --threads="$threads" "${gbench[@]}" >"$tmp/gemm.json"
"$python" "$root/bench/peers/gemm_torch.py" 100000 128 128 "$threads" "$reps" | tee "$tmp/torch_gemm.txt"

"$python" - "$tmp" <<'PY'
import json, re, sys
tmp = sys.argv[1]

def medians(path):
    # Google Benchmark reports aggregates only for two or more repetitions: with REPS=1 the one
    # run is its own median.
    out, single = {}, {}
    for b in json.load(open(f"{tmp}/{path}"))["benchmarks"]:
        if b.get("aggregate_name") == "median":
            out[b["run_name"]] = b
        elif b.get("run_type") == "iteration":
            single.setdefault(b["run_name"], b)
    return out or single

def torch_ms(name):
    text = open(f"{tmp}/torch_{name}.txt").read()
    return float(re.search(r"median_ms=([\d.]+)", text).group(1))

spmm, gemm = medians("spmm.json"), medians("gemm.json")
failed = []

def result(name, value, unit, kind, peer="-", target="-", better="higher"):
    # One machine-readable line per figure (bench/run_all.sh collects them); the prose stays.
    print(f"RESULT name={name} value={value:.6g} unit={unit} kind={kind} better={better} peer={peer} target={target}")

def ratio(label, ours_ms, peer_ms, target, name, peer):
    r = peer_ms / ours_ms
    ok = r >= target
    if not ok:
        failed.append(label)
    print(f"{label}: {r:.2f}x (target >= {target}x) {'PASS' if ok else 'FAIL'}")
    result(name, r, "x", "ratio", peer, target)

dram = spmm["BM_dram_read/real_time"]
print(f"DRAM read bandwidth (1 GiB streaming sum, measured): {dram['GBps']:.1f} GB/s")
result("dram_read_GBps", dram["GBps"], "GB/s", "absolute")
for arg, name in (("0", "uniform"), ("1", "rmat")):
    ours = spmm[f"BM_spmm_dype/{arg}/real_time"]
    eig = spmm[f"BM_spmm_eigen/{arg}/real_time"]
    print(f"spmm {name}: dype {ours['real_time']:.2f} ms ({ours['gathered_GBps']:.1f} GB/s gathered, "
          f"{ours.get('label', '')}), "
          f"eigen {eig['real_time']:.2f} ms, torch {torch_ms(name):.2f} ms (medians, measured)")
    result(f"spmm_{name}_ms", ours["real_time"], "ms", "absolute", better="lower")
    result(f"spmm_{name}_gathered_GBps", ours["gathered_GBps"], "GB/s", "absolute")
    ratio(f"spmm {name} vs torch", ours["real_time"], torch_ms(name), 3.0, f"spmm_{name}_vs_torch", "torch.mm(csr)")
    ratio(f"spmm {name} vs eigen", ours["real_time"], eig["real_time"], 1.3, f"spmm_{name}_vs_eigen", "eigen")
ours = gemm["BM_gemm_dype/real_time"]
plain = gemm["BM_gemm_dype_plain/real_time"]
sg = gemm["BM_gemm_dnnl_sgemm/real_time"]
eig = gemm["BM_gemm_eigen/real_time"]
print(f"gemm 100000x128x128: dype {ours['real_time']:.2f} ms ({ours['GFLOPs']:.1f} GFLOP/s, bias+relu fused), "
      f"dype {plain['real_time']:.2f} ms (no epilogue), "
      f"dnnl_sgemm {sg['real_time']:.2f} ms (no epilogue), eigen {eig['real_time']:.2f} ms (bias+relu), "
      f"torch {torch_ms('gemm'):.2f} ms (medians, measured)")
# Like for like: dnnl_sgemm has no epilogue, so the target compares dype's plain GEMM with it; the
# fused bias+ReLU GEMM (what the GNN layers run) is printed beside it.
result("gemm_ms", ours["real_time"], "ms", "absolute", better="lower")
ratio("gemm (no epilogue) vs dnnl_sgemm", plain["real_time"], sg["real_time"], 0.95,
      "gemm_plain_vs_dnnl_sgemm", "dnnl_sgemm")
print(f"gemm (bias+relu fused) vs dnnl_sgemm (no epilogue; information): "
      f"{sg['real_time'] / ours['real_time']:.2f}x")
result("gemm_fused_vs_dnnl_sgemm", sg["real_time"] / ours["real_time"], "x", "ratio", "dnnl_sgemm(no_epilogue)")
ratio("gemm (bias+relu) vs eigen (bias+relu)", ours["real_time"], eig["real_time"], 1.3,
      "gemm_fused_vs_eigen", "eigen")
print(f"gemm vs torch (information): {torch_ms('gemm') / ours['real_time']:.2f}x")
result("gemm_fused_vs_torch", torch_ms("gemm") / ours["real_time"], "x", "ratio", "torch.addmm+relu")
sys.exit(1 if failed else 0)
PY
