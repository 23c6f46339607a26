#!/usr/bin/env bash
# Cross-process single flight (issue 47): 16 `fleetjit build` processes start
# together on one new cache folder, 8 of them building one kernel
# (examples/saxpy.cu for sm_90), the other 8 a kernel each (the corpus for
# sm_80). Counts, per round, how many of the 8 compiled the shared kernel and
# how many took the disk hit, with the cross-process lock on (the default)
# and off (FLEETJIT_BUILD_WAIT=0: every process compiles, as before), and the
# wall time of the 16. Needs NVRTC (no GPU).
#
#   bench/single_flight_bench.sh [BUILD_DIR] [ROUNDS]
set -euo pipefail
build=${1:-build}
rounds=${2:-3}
cli=$(cd "$build" && pwd)/bin/fleetjit
work=$(mktemp -d /tmp/fj_single_flight.XXXXXX)
trap 'rm -rf "$work"' EXIT
others=(rmsnorm.cu softmax.cu transpose.cu tiled_copy.cu paged_decode.cu
        pipelined_tiles.cu gemm_mma.cu saxpy.cu)
cd "$work"
for wait in 120 0; do
  for ((r = 1; r <= rounds; r++)); do
    rm -rf cache out.*
    start=$(date +%s.%N)
    for i in 0 1 2 3 4 5 6 7; do
      FLEETJIT_CACHE_DIR=$work/cache FLEETJIT_BUILD_WAIT=$wait \
        "$cli" build --target sm_90 examples/saxpy.cu >out.same.$i 2>&1 &
      FLEETJIT_CACHE_DIR=$work/cache FLEETJIT_BUILD_WAIT=$wait \
        "$cli" build --target sm_80 "examples/${others[$i]}" >out.other.$i 2>&1 &
    done
    wait
    end=$(date +%s.%N)
    compiled=$(grep -l ' compiled ' out.same.* | wc -l || true)
    hits=$(grep -l 'disk hit' out.same.* | wc -l || true)
    other=$(grep -l ' compiled ' out.other.* | wc -l || true)
    printf 'FLEETJIT_BUILD_WAIT=%-3s round %d: shared kernel in 8 processes: %d compiled, %d disk hits; 8 other kernels: %d compiled; 16 processes in %.2f s\n' \
      "$wait" "$r" "$compiled" "$hits" "$other" "$(echo "$end - $start" | bc)"
  done
done
