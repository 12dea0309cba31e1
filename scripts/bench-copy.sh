#!/usr/bin/env bash
# Benchmark: a tree of 50 000+ files (default: /usr/share and /usr/include of this machine,
# ~60 000 entries, ~850 MB) copied with `cp -a` onto a uf2fs mount and onto ext4 on a loop
# device, in the same run; then the uf2fs copy is compared with `diff -r` after a remount,
# read by Linux (tools/linux-f2fs: every file hashed, compared with the source's treeview view),
# and compared with `diff -r` again after Linux mounted and unmounted it.
# Prints a table and writes target/bench/copy/copy.json. Run as root from the checkout:
#   bash scripts/bench-copy.sh [SRC_DIR...]
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
cargo build --release --quiet -p uf2fs
U=$ROOT/target/release/uf2fs
W=$ROOT/target/bench/copy
for m in "$W/mnt" "$W/ext4"; do mountpoint -q "$m" 2>/dev/null && umount "$m"; done
rm -rf "$W"; mkdir -p "$W/src" "$W/mnt" "$W/ext4" "$W/payload"
SRCS=("$@"); [ ${#SRCS[@]} -gt 0 ] || SRCS=(/usr/share /usr/include)
cp -a "${SRCS[@]}" "$W/src/"
entries=$(find "$W/src" | wc -l); mb=$(du -sm "$W/src" | cut -f1)
size=$(( (mb * 2 + 1024) ))M
sync; echo 3 > /proc/sys/vm/drop_caches || true

now() { date +%s.%N; }
# uf2fs: mount, copy, unmount (the unmount writes the final checkpoint: part of the cost).
"$U" mkfs "$W/f2fs.img" --size "$size" >/dev/null
"$U" mount "$W/f2fs.img" "$W/mnt"
t0=$(now); cp -a "$W/src" "$W/mnt/tree"; t1=$(now); "$U" umount "$W/mnt"; t2=$(now)
# ext4 on a loop device, same sizes: copy, then umount (which writes everything back).
truncate -s "$size" "$W/ext4.img"; mkfs.ext4 -q "$W/ext4.img"
mount -o loop "$W/ext4.img" "$W/ext4"
t3=$(now); cp -a "$W/src" "$W/ext4/tree"; t4=$(now); umount "$W/ext4"; t5=$(now)

tools/f2fs-verdict "$W/f2fs.img"
"$U" mount -o ro "$W/f2fs.img" "$W/mnt"
diff -r --no-dereference "$W/src" "$W/mnt/tree" >/dev/null && diff1=identical || diff1=DIFFERENT
"$U" umount "$W/mnt"

# Linux reads every file (hashes) and its view is compared with the source's.
gcc -O2 -static -o "$W/payload/treeview" tools/treeview.c
F=type,mode,uid,gid,size,mtime,hash,target,links,rdev
(cd "$W/src" && "$W/payload/treeview" -f $F . | sort > "$W/src-view.txt")
cat > "$W/job.sh" <<JOB
set -e
\$PAYLOAD/treeview -f $F /mnt/tree | sort > \$OUT/view.txt
echo linux-was-here > /mnt/linux-marker
JOB
t6=$(now)
tools/linux-f2fs --out "$W/k" --payload "$W/payload" "$W/f2fs.img" "$W/job.sh" >/dev/null
t7=$(now)
cmp -s "$W/src-view.txt" "$W/k/files/view.txt" && linux=identical || linux=DIFFERENT
complaints=$(grep F2FS-fs "$W/k/dmesg.txt" | grep -ciE "error|inconsistent|corrupt|fsck" || true)
tools/f2fs-verdict "$W/f2fs.img"
"$U" mount "$W/f2fs.img" "$W/mnt"
diff -r --no-dereference "$W/src" "$W/mnt/tree" >/dev/null && diff2=identical || diff2=DIFFERENT
"$U" umount "$W/mnt"

py() { python3 -c "print(round($1, 2))"; }
u_copy=$(py "$t1-$t0"); u_total=$(py "$t2-$t0"); e_copy=$(py "$t4-$t3"); e_total=$(py "$t5-$t3")
ratio=$(py "($t2-$t0)/($t5-$t3)")
printf '\n%s entries, %s MB (%s)\n\n' "$entries" "$mb" "${SRCS[*]}"
printf '| %-28s | %10s | %18s |\n' "cp -a onto" "copy (s)" "copy + umount (s)"
printf '|%s|%s|%s|\n' "------------------------------" "------------" "--------------------"
printf '| %-28s | %10s | %18s |\n' "uf2fs (FUSE, image file)" "$u_copy" "$u_total"
printf '| %-28s | %10s | %18s |\n' "ext4 (loop device)" "$e_copy" "$e_total"
printf '\nuf2fs / ext4 (copy + umount): %s\n' "$ratio"
printf 'diff -r after remount: %s; Linux view (hashes): %s, %s F2FS complaints; diff -r after the Linux round trip: %s\n' \
  "$diff1" "$linux" "$complaints" "$diff2"
cat > "$W/copy.json" <<JSON
{"entries": $entries, "megabytes": $mb, "sources": "${SRCS[*]}",
 "uf2fs": {"copy_s": $u_copy, "copy_umount_s": $u_total},
 "ext4_loop": {"copy_s": $e_copy, "copy_umount_s": $e_total},
 "ratio_copy_umount": $ratio, "diff_after_remount": "$diff1", "linux_view": "$linux",
 "linux_f2fs_complaints": $complaints, "diff_after_linux": "$diff2",
 "linux_job_s": $(py "$t7-$t6")}
JSON
echo "wrote $W/copy.json"
[ "$diff1$linux$diff2" = identicalidenticalidentical ] && [ "$complaints" = 0 ]
