#!/usr/bin/env bash
# The figures of docs/tuning.md: the tuning time of one space (bench/tune/:
# 5 macro sets x 4 blocks of a 16 Mi-element axpy, one candidate wrong), the
# lookup in a fresh process on the same host, and the remote hit on a
# second "host" (its own cache folder, NVRTC hidden) through Redis, then
# that host's disk hit. Needs a GPU and FJ_REDIS_URL (run it under
# scripts/dev/with-redis); without Redis the remote step is skipped.
#   scripts/dev/with-redis bench/tune_bench.sh build
set -euo pipefail
B=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
fj=$B/bin/fleetjit
space=(tune "$here/tune/tiled_axpy.cu" --space "$here/tune/tiled_axpy.json")
host_a=$(mktemp -d /tmp/fj-tune-a.XXXXXX)
host_b=$(mktemp -d /tmp/fj-tune-b.XXXXXX)
trap 'rm -rf "$host_a" "$host_b"' EXIT
export FLEETJIT_FLEET_KEY=${FLEETJIT_FLEET_KEY:-00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff}
remote=()
[ -n "${FJ_REDIS_URL:-}" ] && remote=(FLEETJIT_REMOTE_CACHE="$FJ_REDIS_URL")
"$fj" info | head -5
echo "== host A, cold: builds and times every candidate"
env FLEETJIT_CACHE_DIR="$host_a" "${remote[@]}" "$fj" "${space[@]}"
echo "== host A, a fresh process: the stored result"
env FLEETJIT_CACHE_DIR="$host_a" "${remote[@]}" "$fj" "${space[@]}" | tail -1
env FLEETJIT_CACHE_DIR="$host_a" "${remote[@]}" "$fj" "${space[@]}" | tail -1
env FLEETJIT_CACHE_DIR="$host_a" "$fj" cache ls | grep -E "tune|entries"
if [ ${#remote[@]} -eq 0 ]; then
  echo "== no FJ_REDIS_URL: the second host's remote hit is skipped"
  exit 0
fi
echo "== host B (its own cache folder, NVRTC hidden): from Redis"
env FLEETJIT_CACHE_DIR="$host_b" FLEETJIT_LIBNVRTC=/nonexistent/libnvrtc.so.13 \
  "${remote[@]}" "$fj" "${space[@]}" | tail -1
echo "== host B, a fresh process: its disk"
env FLEETJIT_CACHE_DIR="$host_b" FLEETJIT_LIBNVRTC=/nonexistent/libnvrtc.so.13 \
  "${remote[@]}" "$fj" "${space[@]}" | tail -1
