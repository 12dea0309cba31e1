#!/usr/bin/env bash
# make-fsync-crash-image.sh: regenerate tests/fixtures/linux-fsync-crash.* (see
# tests/fixtures/README.md), a crash image in Linux 6.1's roll-forward state.
#
#   bash tests/images/make-fsync-crash-image.sh      (from the repository root)
#
# A fresh 128 MiB image from the host's mkfs.f2fs (defaults); Linux (tools/linux-f2fs)
# runs tests/images/fsync-crash-job.sh on it: a checkpointed base, fsync'd changes, then
# F2FS_IOC_SHUTDOWN without sync. Kept only if the job exited 0, dmesg has no F2FS complaint
# and the current checkpoint is not a clean unmount's. Then Linux mounts a copy, must roll
# forward (recover_inode in dmesg) and read every fsync'd file back with its sha256, and
# fsck.f2fs must find the recovered copy clean. Stores, replacing earlier copies:
#   tests/fixtures/linux-fsync-crash.img.gz       the crash image (gzip -9 -n)
#   tests/fixtures/linux-fsync-crash.sha256.txt   sha256sum of the fsync'd files, made in the
#                                                 guest before the shutdown (paths from /mnt)
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
tools=tools
fix=tests/fixtures
die() { echo "make-fsync-crash-image: $*" >&2; exit 1; }
for t in mkfs.f2fs gcc gzip; do command -v $t >/dev/null || die "$t missing"; done
[ -x $tools/linux-f2fs ] && [ -x $tools/f2fs-verdict ] || die "no $tools/linux-f2fs or $tools/f2fs-verdict"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/payload"
gcc -O2 -static -Wall -o "$work/payload/shutdown" tests/images/shutdown.c
img=$work/crash.img
truncate -s 128M "$img"
mkfs.f2fs -f -q "$img"

complaints() { grep 'F2FS-fs' "$1/dmesg.txt" | grep -iE 'error|warn|inconsisten|corrupt|fsck|invalid|wrong' || true; }

echo "== Linux: base, fsyncs, shutdown without sync"
$tools/linux-f2fs --out "$work/crash" --payload "$work/payload" "$img" tests/images/fsync-crash-job.sh \
  || { tail -20 "$work/crash/job.log" >&2 || true; die "the crash job failed"; }
cat "$work/crash/job.log"
bad=$(complaints "$work/crash"); [ -z "$bad" ] || die "F2FS complained: $bad"
[ "$(wc -l < "$work/crash/files/sha256.txt")" = 7 ] || die "the job's sha256.txt does not list 7 files"
python3 - "$img" <<'PY' || die "the crash image's checkpoint is a clean unmount's"
import struct, sys
f = open(sys.argv[1], 'rb'); f.seek(1024 + 76); cp, = struct.unpack('<I', f.read(4))
def pack(a):
    f.seek(a * 4096); b = f.read(4096); return struct.unpack_from('<Q', b, 0)[0], struct.unpack_from('<I', b, 132)[0]
(v1, f1), (v2, f2) = pack(cp), pack(cp + 512)
flags = f2 if ((v2 - v1) & (1 << 63)) == 0 and v2 != v1 else f1
print(f"crash image: checkpoint versions {v1:#x} / {v2:#x}, current flags {flags:#x}")
sys.exit(1 if flags & 1 else 0)
PY
gzip -9 -n < "$img" > "$work/crash.img.gz"

echo "== Linux: recovery of a copy"
cp "$img" "$work/copy.img"
cp "$work/crash/files/sha256.txt" "$work/payload/sha256.txt"
printf 'set -e\nsha256sum -c $PAYLOAD/sha256.txt\n' > "$work/check.sh"
$tools/linux-f2fs --out "$work/check" --payload "$work/payload" "$work/copy.img" "$work/check.sh" \
  || { tail -20 "$work/check/job.log" >&2 || true; die "Linux does not read the fsync'd files back"; }
bad=$(complaints "$work/check"); [ -z "$bad" ] || die "F2FS complained at recovery: $bad"
grep -q recover_inode "$work/check/dmesg.txt" || die "Linux did not roll forward"
grep 'F2FS-fs' "$work/check/dmesg.txt" | sed 's/^/   dmesg: /'
$tools/f2fs-verdict "$work/copy.img" || die "fsck.f2fs does not find the recovered copy clean"

mv "$work/crash.img.gz" $fix/linux-fsync-crash.img.gz
cp "$work/crash/files/sha256.txt" $fix/linux-fsync-crash.sha256.txt
echo "== done: $fix/linux-fsync-crash.img.gz ($(stat -c %s $fix/linux-fsync-crash.img.gz) bytes)"
