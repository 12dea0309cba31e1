# fsync-crash-job.sh: runs inside the linux-f2fs guest (busybox sh, cwd /mnt) and leaves the
# image as a power cut after a series of fsyncs would: Linux's roll-forward state. Used by
# crates/cli/tests/recovery_with_linux.rs and tests/images/make-fsync-crash-image.sh.
# Needs $PAYLOAD/shutdown (tests/images/shutdown.c, static). Steps:
#   1. a checkpointed base: old/{append.txt, overwrite.bin, rename-me, untouched}, then `sync`
#      (one checkpoint);
#   2. changes, each followed by fsync(2) of the changed file and nothing else: a new file in a
#      new directory, a rename, a second new file in that (now checkpointed) directory, an
#      append, a two-block overwrite in the middle of a file, a new 12 MiB file (inode, both
#      direct nodes, the first indirect node and one of its direct nodes) and a new inline file;
#   3. $OUT/sha256.txt: `sha256sum` of every fsync'd file (paths relative to /mnt, sorted);
#      $OUT/status-before.txt and status-after.txt: debugfs status around step 2 (CP calls);
#   4. F2FS_IOC_SHUTDOWN with the no-sync flag: no checkpoint, nothing more is written.
# Linux's own rules make some of these fsyncs write a checkpoint (a file whose parent
# directory is not checkpointed, a renamed file: its parent ino is lost); the others go to
# the warm-node log as FSYNC-marked nodes only. The job prints which (CP count per step).
set -e
P=${PAYLOAD:-/payload}
OUT=${OUT:-/out}
cd /mnt
fail() { echo "fsync-crash-job: FAILED: $*"; exit 1; }
# gen NAME NBYTES: deterministic, compressible bytes; every 4 KiB block starts with its own label
gen() {
  awk -v name="$1" -v n="$2" 'BEGIN {
    f = ""; while (length(f) < 4200) f = f "The quick brown fox jumps over the lazy dog; 0123456789 ~!@#$%^&*() "
    for (off = 0; off < n; off += 4096) {
      b = sprintf("<%s block %d>\n", name, off / 4096) f
      k = n - off; if (k > 4096) k = 4096
      printf "%s", substr(b, 1, k)
    }
  }'
}
cps() { awk '/CP calls:/ { print $3; exit }' /sys/kernel/debug/f2fs/status 2>/dev/null || echo '?'; }
fsync_it() { $P/shutdown fsync "$1" || fail "fsync $1"; echo "fsync-crash-job: fsync $1 (CP calls now $(cps))"; }

mkdir old
gen append 10000 > old/append.txt
gen overwrite 262144 > old/overwrite.bin
gen renamed 5000 > old/rename-me
gen untouched 3000 > old/untouched
sync
echo "fsync-crash-job: base checkpointed (CP calls $(cps))"
cat /sys/kernel/debug/f2fs/status > $OUT/status-before.txt 2>/dev/null || true

mkdir newdir
gen new-in-new-dir 7000 > newdir/first.txt
fsync_it newdir/first.txt
mv old/rename-me renamed.txt
fsync_it renamed.txt
gen second-in-new-dir 20000 > newdir/second.txt
fsync_it newdir/second.txt
gen appended 5000 >> old/append.txt
fsync_it old/append.txt
gen overwritten 8192 | dd of=old/overwrite.bin bs=4096 seek=10 conv=notrunc 2>/dev/null
fsync_it old/overwrite.bin
gen big 12583035 > old/big.bin
fsync_it old/big.bin
gen tiny 100 > old/tiny.txt
fsync_it old/tiny.txt

sha256sum newdir/first.txt renamed.txt newdir/second.txt old/append.txt old/overwrite.bin \
  old/big.bin old/tiny.txt | sort -k 2 > $OUT/sha256.txt
cat /sys/kernel/debug/f2fs/status > $OUT/status-after.txt 2>/dev/null || true
$P/shutdown /mnt nosync || fail "shutdown"
echo "fsync-crash-job: shut down without sync (CP calls $(cps))"
