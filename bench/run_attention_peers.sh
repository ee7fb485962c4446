#!/usr/bin/env bash
# Side-by-side: dype's CPU sliding-window attention vs PyTorch peers (Longformer sliding chunks and
# dense masked attention) on the same inputs, same thread count. All figures are measured.
#
#   bench/run_attention_peers.sh [BUILD_DIR]      (default build/release; needs bench_attention)
#
# Env: THREADS (2), SEQ_LENS ("4096 16384"), WINDOW (512), HEAD_DIM (64), HEADS (8), REPS (7),
#      DENSE_MAX_SEQ (4096: dense attention holds heads x seq_len^2 floats, 8 GiB at 16384).
# Prints dype's time, thread counts, peak RSS and scratch per seq_len (memory must grow linearly),
# each peer's time and max abs diff vs dype, and one ratio line per peer with PASS/FAIL against
# the targets (>= 4x chunked, >= 20x dense). Exits non-zero if a peer is missing or any check fails.
# Each figure is also one line "RESULT name=.. value=.. unit=.. kind=.. better=.. peer=.. target=.."
# (bench/run_all.sh collects them).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build/release}
bench="$build/bench/bench_attention"
threads=${THREADS:-2}
seq_lens=${SEQ_LENS:-"4096 16384"}
window=${WINDOW:-512}
head_dim=${HEAD_DIM:-64}
heads=${HEADS:-8}
reps=${REPS:-7}
dense_max=${DENSE_MAX_SEQ:-4096}

if [[ ! -x "$bench" ]]; then
  echo "run_attention_peers: $bench not found; build it: cmake --preset release -B $build &&" \
       "cmake --build $build --target bench_attention" >&2
  exit 2
fi
# shellcheck source=bench/peer_env.sh
source "$root/bench/peer_env.sh"
torch_python run_attention_peers

echo "== window attention peers: threads=$threads window=$window head_dim=$head_dim heads=$heads"
echo "   $(uptime)"
status=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for seq in $seq_lens; do
  dir="$tmp/seq$seq"
  mkdir -p "$dir"
  "$bench" --peer-data="$dir" --seq-len="$seq" --window="$window" --head-dim="$head_dim" \
    --heads="$heads" --threads="$threads" --reps="$reps"
  peers="chunked"
  if ((seq <= dense_max)); then peers="chunked,dense"; fi
  "$python" "$root/bench/peers/attention_torch.py" --data "$dir" --threads "$threads" \
    --reps "$((reps < 5 ? reps : 5))" --peers "$peers" || status=1
done

# Linear memory: scratch per thread must not grow with seq_len; peak RSS grows with the inputs.
read -r -a seq_list <<<"$seq_lens"
"$python" - "$tmp" "${seq_list[@]}" <<'EOF' || status=1
import json, sys
tmp, seqs = sys.argv[1], [int(s) for s in sys.argv[2:]]
rows = [json.load(open(f"{tmp}/seq{s}/dype.json")) for s in seqs]
for r in rows:
    print(f"memory (measured) seq_len={r['seq_len']}: peak RSS {r['peak_rss_bytes'] / 2**20:.1f} MiB, "
          f"kernel added {(r['peak_rss_bytes'] - r['rss_after_inputs_bytes']) / 2**20:.1f} MiB over its "
          f"inputs, scratch {r['scratch_bytes_per_thread'] / 1024:.0f} KiB per thread x {r['threads']} threads")
if len(rows) >= 2:
    a, b = rows[0], rows[-1]
    grow = b["seq_len"] / a["seq_len"]
    rss = b["peak_rss_bytes"] / a["peak_rss_bytes"]
    ok = b["scratch_bytes_per_thread"] <= a["scratch_bytes_per_thread"] and rss <= grow * 1.1
    scratch = b["scratch_bytes_per_thread"] / a["scratch_bytes_per_thread"]
    print(f"memory linear in seq_len: seq_len x{grow:g} -> peak RSS x{rss:.2f}, scratch "
          f"x{scratch:.2f} {'PASS' if ok else 'FAIL'}")
    # Machine-readable (bench/run_all.sh collects these lines).
    print(f"RESULT name=peak_rss_growth_seq{a['seq_len']}_to_{b['seq_len']} value={rss:.4g} unit=x kind=ratio "
          f"better=lower peer=seq_len_growth target={grow * 1.1:g}")
    print(f"RESULT name=scratch_growth_seq{a['seq_len']}_to_{b['seq_len']} value={scratch:.4g} unit=x kind=ratio "
          f"better=lower peer=- target=1")
    sys.exit(0 if ok else 1)
EOF
exit $status
