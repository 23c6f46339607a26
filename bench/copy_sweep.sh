#!/usr/bin/env bash
# Times copy_bench configurations one by one (FJ_COPY_BENCH_ONLY), one line
# each: the configuration, then the anchor and its best line.
#   bench/copy_sweep.sh BUILD_DIR "impl,stages,bx,by,ctas,threads[,unroll]" ...
set -uo pipefail
B=$1; shift
for c in "$@"; do
  out=$(FJ_COPY_BENCH_ONLY="$c" "$B/bench/copy_bench" 2>&1)
  a=$(grep -m1 "^cuMemcpyDtoD" <<<"$out" | awk '{print $3}')
  l=$(grep "(best)" <<<"$out" | sed 's/  */ /g')
  echo "$c | anchor $a ms | ${l:-$(tail -2 <<<"$out" | tr '\n' ' ')}"
done
