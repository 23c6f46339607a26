#!/usr/bin/env bash
# The paged-decode and GEMM reference kernels on the GPU host, in one call:
# bench/attn_gemm_torch.py once per part and implementation (a hang in one
# loses only that process), then Nsight Compute on the default shapes.
#   bench/attn_gemm_run.sh BUILD_DIR   (e.g. .device/build after unpacking)
# Writes $OUT/attn-gemm.log and $OUT/attn-gemm-ncu.txt when OUT is set.
set -uo pipefail
cd "$(dirname "$0")/.."
B=${1:?usage: bench/attn_gemm_run.sh BUILD_DIR}
O=${OUT:-/tmp}
export PYTHONPATH=$PWD/bindings/python PYTHONUNBUFFERED=1
export FLEETJIT_LIBRARY=$PWD/$B/lib/libfleetjit.so.1
T0=$SECONDS
LOG=$O/attn-gemm.log
git rev-parse --short HEAD 2>/dev/null | sed 's/^/commit /' > "$LOG" || true
cat "$B/COMMIT" 2>/dev/null | sed 's/^/build /' >> "$LOG"
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader >> "$LOG"
for part in decode gemm; do
  for impl in tma cp_async sync cp_async@compute_80; do
    timeout 60 python3 bench/attn_gemm_torch.py --only $part --impl $impl >> "$LOG" 2>&1
    echo "$part $impl rc=$? at $((SECONDS - T0)) s" >> "$LOG"
  done
done
if command -v ncu > /dev/null; then
  timeout 120 ncu --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section Occupancy --section WarpStateStats --section LaunchStats \
    -k regex:"paged_decode|gemm_mma" \
    python3 bench/attn_gemm_torch.py --quick --profile > "$O/attn-gemm-ncu.txt" 2>&1
fi
grep -E "^  [a-z_0-9@]+ +(S[0-9]|[0-9]+x)|HANG|rror|^decode|^gemm|^  D2D|^  torch|rc=|^[a-z_]+ [0-9 ]*  +[a-z_@0-9]+ +[0-9.]+ " "$LOG" | cut -c1-200
