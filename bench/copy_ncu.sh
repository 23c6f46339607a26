#!/usr/bin/env bash
# Nsight Compute on copy_bench's tile copy, one launch per configuration,
# clocks unlocked: DRAM/L2 throughput, the L2 sectors the SMs read and
# wrote (a 2 GiB copy is 67,108,864 sectors each way), warp stalls and
# occupancy. With $OUT set, also the SASS of each built kernel (cuobjdump).
#   bench/copy_ncu.sh BUILD_DIR "impl,stages,bx,by,ctas,threads[,unroll]" ...
set -uo pipefail
B=$1; shift
NCU=${NCU:-/usr/local/cuda/bin/ncu}
CACHE=$(mktemp -d)
export XDG_CACHE_HOME=$CACHE FLEETJIT_CACHE_DIR=$CACHE/fleetjit
M=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__inst_executed.sum,gpu__time_duration.sum
for c in "$@"; do
  echo "=== $c"
  FJ_COPY_BENCH_ONLY="$c" "$NCU" --clock-control none -k tile_copy -s 1 -c 1 \
    --section SpeedOfLight --section WarpStateStats --section Occupancy --metrics "$M" \
    "$B/bench/copy_bench" 2>&1 | grep -E "^\s+[A-Za-z_]" | grep -vE "^\s+(INF|OPT|WRN)|----"
done
if [ -n "${OUT:-}" ]; then
  python3 - "$CACHE" "$OUT" <<'PY'
import glob, os, subprocess, sys
cache, out = sys.argv[1], sys.argv[2]
for f in glob.glob(cache + "/**/*", recursive=True):
    if not os.path.isfile(f):
        continue
    b = open(f, "rb").read()
    i = b.find(b"\x7fELF")
    if i < 0:
        continue
    cubin = os.path.join(out, os.path.basename(f) + ".cubin")
    open(cubin, "wb").write(b[i:])
    s = subprocess.run(["/usr/local/cuda/bin/cuobjdump", "-sass", cubin], capture_output=True, text=True)
    open(cubin + ".sass", "w").write(s.stdout + s.stderr)
    os.remove(cubin)
PY
fi
rm -rf "$CACHE"
