#!/usr/bin/env bash
# `make bench-gpu`, run where MLX's CUDA build has an NVIDIA GPU, from the bundle gpu/build.sh made
# (as gpu/run.sh): the device's copy bandwidth, then the harness (gpu/bench.rs) twice: timed as
# users see it (lazy chains, wall time), and under Nsight Compute (`ncu`) for each kernel's own
# time and DRAM bytes. gpu/bench_report.py joins them into one table (the table docs/benchmarks.md
# records). Builds nothing. Arguments go to the harness (`--filter SUBSTRING`).
# Output: $KERNELGEN_BENCH_OUT (default target/gpu/bench/): bench.jsonl, profile.jsonl, ncu.csv,
# report.md; the report is also printed. KERNELGEN_BENCH_PHASES=timed or =profiled runs one half
# (a whole run takes about 10 minutes on an H200: where the machine is lent in shorter calls, one half a
# call); the report joins what the folder holds.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUNDLE="${KERNELGEN_GPU_BUNDLE:-$ROOT/target/gpu/bundle}"
PYTHON="${PYTHON:-python3}"
OUT="${KERNELGEN_BENCH_OUT:-$ROOT/target/gpu/bench}"
NCU="${NCU:-ncu}"
source "$ROOT/gpu/env.sh"
if [[ ! -x $BUNDLE/bin/bench_gpu ]]; then
    echo "gpu/bench.sh: the bundle at $BUNDLE has no bench_gpu: build it again with make gpu-build" >&2
    exit 2
fi
mkdir -p "$OUT"
PHASES="${KERNELGEN_BENCH_PHASES:-timed profiled}"
case " $PHASES " in
    *" timed "*|*" profiled "*) ;;
    *) echo "gpu/bench.sh: KERNELGEN_BENCH_PHASES=$PHASES: expected timed, profiled or both" >&2; exit 2 ;;
esac

echo "---- device-to-device copy (PyTorch, 1 GiB, read + write)"
"$PYTHON" - > "$OUT/copy.txt" <<'PY'
import torch
a = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
b = torch.empty_like(a)
best = float("inf")
for _ in range(20):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); b.copy_(a); e.record(); e.synchronize()
    best = min(best, s.elapsed_time(e) / 1e3)
print(f"{2 * a.numel() / best / 1e12:.4f}")
PY
echo "$(cat "$OUT/copy.txt") TB/s"

if [[ " $PHASES " == *" timed "* ]]; then
    echo "---- timed (lazy chains, wall time)"
    "$BUNDLE/bin/bench_gpu" "$@" | tee "$OUT/bench.jsonl"
fi

if [[ " $PHASES " == *" profiled "* ]]; then
    echo "---- profiled ($NCU)"
    rm -f "$OUT/profile.ncu-rep"
    # KERNELGEN_BENCH_LIMITS=1: besides time and bytes, what bounds each kernel: DRAM and issue-slot
    # use, achieved occupancy, and how many warps an issue waited on memory (long scoreboard), on the
    # load queue (LG throttle), or eligible but not picked (not selected: the schedulers were busy
    # issuing). Off by default: with its extra replay passes the profile of the expert kernels alone
    # ran past 200 s on an H200 (the whole catalog's profile without them takes about 5 minutes).
    LIMITS=
    if [[ ${KERNELGEN_BENCH_LIMITS:-0} == 1 ]]; then
        LIMITS=,gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed,sm__inst_issued.avg.pct_of_peak_sustained_elapsed
        LIMITS=$LIMITS,sm__warps_active.avg.pct_of_peak_sustained_active
        for stall in long_scoreboard lg_throttle not_selected; do
            LIMITS=$LIMITS,smsp__average_warps_issue_stalled_${stall}_per_issue_active.ratio
        done
    fi
    "$NCU" --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum$LIMITS \
        -o "$OUT/profile" "$BUNDLE/bin/bench_gpu" --profile "$@" > "$OUT/profile.jsonl"
    "$NCU" --import "$OUT/profile.ncu-rep" --csv --page raw > "$OUT/ncu.csv"
fi
touch "$OUT/bench.jsonl"

"$PYTHON" "$ROOT/gpu/bench_report.py" "$OUT" | tee "$OUT/report.md"
