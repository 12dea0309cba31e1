# view-job.sh: runs inside the tools/linux-f2fs guest (busybox sh) on a committed fixture
# image and records Linux's view of it again, without changing the image: the mount is
# read-only. Driven by tests/images/rerecord-views.sh, which ships in $PAYLOAD:
#   treeview               static tools/treeview.c
#   modules/*.ko           (quota image only) loaded before the job mounts the image itself
#   compressed.txt         (compress image only) the committed list of compressed files
# Outputs in $OUT: view.txt (treeview, all default fields, sorted) and, for the compress
# image, compressed.txt with each hash= taken again on a tmpfs copy (the bytes as read),
# after checking that the hash through F2FS is the same.
set -e
P=${PAYLOAD:-/payload}
fail() { echo "view-job: FAILED: $*"; exit 1; }
if ! grep -q ' /mnt ' /proc/mounts; then
  for m in $P/modules/*.ko; do if [ -f "$m" ]; then insmod "$m" || fail "insmod $m"; fi; done
  mount -t f2fs -o ro /dev/vda /mnt || fail "mount"
  SELF_MOUNTED=1
fi
grep ' /mnt ' /proc/mounts | grep -q ' ro[ ,]' || fail "/mnt is not read-only"
$P/treeview /mnt | sort > $OUT/view.txt || fail "treeview"
if [ -f $P/compressed.txt ]; then
  : > $OUT/compressed.txt
  while IFS='	' read -r f alg log blocks hash sum; do
    cp "/mnt/$f" /tmp/copy
    h=$($P/treeview -f hash /tmp/copy | cut -f2)
    [ "$h" = "$($P/treeview -f hash "/mnt/$f" | cut -f2)" ] || fail "$f: hash through F2FS differs from its copy"
    [ "sha256=$(sha256sum < /tmp/copy | cut -d' ' -f1)" = "$sum" ] || fail "$f: bytes differ from the record"
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$f" "$alg" "$log" "$blocks" "$h" "$sum" >> $OUT/compressed.txt
    rm /tmp/copy
  done < $P/compressed.txt
fi
if [ -n "$SELF_MOUNTED" ]; then umount /mnt || fail "umount"; fi
wc -l $OUT/*.txt
