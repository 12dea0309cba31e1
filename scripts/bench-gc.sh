#!/usr/bin/env bash
# Benchmark: the cleaner's write amplification (`uf2fs-bench gc-waf`, crates/bench/src/gcwaf.rs).
# The same jobs on uf2fs (FUSE mount over a loop device: the device's own write counter),
# on Linux 6.1 (tools/linux-f2fs under qemu, or the saved baselines in
# crates/bench/baselines when the parameters match) and at the exact-greedy limit
# (crates/bench/src/greedy.rs):
#   seed000a/b/c  4 KiB random overwrites of one file at 96% of a 2 GiB image (-o 3.89 -s 1):
#                 O_DIRECT lfs, buffered + fsync/64 lfs, buffered + fsync/64 adaptive
#   hotcold, zipf (b) with 80% of the writes to 20% of the file, and Zipf 0.9
#   seed001       1 GiB of 32 KiB files to ENOSPC, then 100000 O_SYNC 4 KiB rewrites
#   seed003       (a) with a per-second maximum-latency log (uf2fs only)
# Prints a table and writes target/bench/gc-waf/gc-waf.json. Run as root from the checkout:
#   bash scripts/bench-gc.sh [gc-waf options...]     (uf2fs-bench gc-waf --help lists them)
# e.g. a quick run: bash scripts/bench-gc.sh --workloads seed000b --size 512M --ovp 5 --fill-pct 90
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
have() { command -v "$1" >/dev/null 2>&1; }
have mkfs.f2fs || need+=(f2fs-tools)
have fusermount3 || need+=(fuse3)
have gcc || need+=(gcc)
[ -f /usr/lib/x86_64-linux-gnu/libc.a ] || need+=(libc6-dev)   # the payloads are static
have losetup || need+=(mount)
if [ ${#need[@]} -gt 0 ]; then
  echo "bench-gc: installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
have cargo || { echo "bench-gc: cargo not found: install the Rust toolchain first" >&2; exit 1; }
# tools/linux-f2fs installs qemu, the kernel and busybox itself the first time it runs.

cargo build --release --quiet -p uf2fs -p uf2fs-bench

# The benchmark unmounts and detaches what it made, also on errors; this covers an
# interrupted run (Ctrl-C) too.
W=target/bench/gc-waf
prev=""
for a in "$@"; do [ "$prev" = --dir ] && W=$a; case "$a" in --dir=*) W=${a#--dir=};; esac; prev=$a; done
cleanup() {
  for m in "$W"/*/uf2fs/mnt; do
    mountpoint -q "$m" 2>/dev/null && { target/release/uf2fs umount "$m" || fusermount3 -u -z "$m" || true; }
  done
  for img in "$W"/*/uf2fs/image.img; do
    [ -f "$img" ] && losetup -j "$img" | cut -d: -f1 | xargs -r -n1 losetup -d || true
  done
}
trap cleanup EXIT INT TERM

target/release/uf2fs-bench gc-waf "$@"
