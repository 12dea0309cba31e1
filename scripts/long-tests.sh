#!/usr/bin/env bash
# The long suites (not in CI): fsx for a million operations per seed, stress-ng's filesystem
# class on a mount, and fstests' generic group (when FSTESTS_SRC points at an fstests
# checkout; see scripts/fstests.sh). After each: unmount, tools/f2fs-verdict, and
# Linux (tools/linux-f2fs) mounts the image and reads every file.
#   bash scripts/long-tests.sh                    # fsx 1M ops x 3 seeds, stress-ng 10 min
#   FSTESTS_SRC=~/xfstests-dev bash scripts/long-tests.sh
# STRESS_SECONDS (600), UF2FS_FSX_OPS (1000000) and FSTESTS_GROUP (all: every generic test) change the lengths.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
bash scripts/setup.sh
bash scripts/judges.sh >/dev/null
command -v stress-ng >/dev/null || { apt-get update -qq >/dev/null; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq stress-ng >/dev/null; }
cargo build --release --quiet -p uf2fs
U=$ROOT/target/release/uf2fs

echo "== fsx: ${UF2FS_FSX_OPS:-1000000} operations x 3 seeds, and pjdfstest (posix_judges test)"
UF2FS_FSX_OPS=${UF2FS_FSX_OPS:-1000000} cargo nextest run --release --profile long -p uf2fs \
  --test posix_judges --no-capture 2>&1 | grep -E "^(pjdfstest|fsx):|PASS|FAIL|TIMEOUT"

echo "== stress-ng --class filesystem for ${STRESS_SECONDS:-600} s"
W=$ROOT/target/long; mountpoint -q "$W/mnt" 2>/dev/null && "$U" umount "$W/mnt"
rm -rf "$W"; mkdir -p "$W/mnt" "$W/payload"
"$U" mkfs "$W/img" --size 4G >/dev/null
"$U" mount "$W/img" "$W/mnt"
# Stressors that need what a FUSE file system cannot give (O_DIRECT alignment, ioctls, a
# block device) report themselves as skipped; any other failure fails the run.
stress-ng --class filesystem --all 1 --timeout "${STRESS_SECONDS:-600}s" --temp-path "$W/mnt" \
  --metrics-brief --log-file "$W/stress-ng.log" || { tail -40 "$W/stress-ng.log"; exit 1; }
# 0.15 (Debian 12) prints no passed/failed tally, only "successful run completed".
grep -E "passed|failed|skipped|untrustworthy|successful run completed" "$W/stress-ng.log" | tail -5
"$U" status "$W/mnt"
"$U" umount "$W/mnt"
tools/f2fs-verdict "$W/img"
"$U" fsck "$W/img"
gcc -O2 -static -o "$W/payload/treeview" tools/treeview.c
printf 'set -e\n$PAYLOAD/treeview /mnt > $OUT/view.txt\n' > "$W/job.sh"
tools/linux-f2fs --out "$W/k" --payload "$W/payload" "$W/img" "$W/job.sh" >/dev/null
! grep F2FS-fs "$W/k/dmesg.txt" | grep -iE "error|inconsistent|corrupt|fsck"
echo "Linux mounted the image and read $(wc -l < "$W/k/files/view.txt") entries"

if [ -n "${FSTESTS_SRC:-}" ]; then
  # With FSTYP=fuse fstests' "all" is the generic tests ("-g generic" is an empty group).
  echo "== fstests generic (scripts/fstests.sh; FSTESTS_GROUP=generic/quick for the quick part)"
  bash scripts/fstests.sh -g "${FSTESTS_GROUP:-all}"
else
  echo "== fstests: skipped (set FSTESTS_SRC to an fstests checkout to run them)"
fi
