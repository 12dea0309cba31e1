# kernel-job.sh: runs inside the linux-f2fs guest (busybox sh, cwd /mnt) and builds the rich
# tree of the Linux-written fixtures (see tests/fixtures/README.md), then records the kernel's
# own view of it in $OUT. Driven by tests/images/make-kernel-images.sh, which ships in $PAYLOAD:
#   treeview, mksock, setcompr  static helpers (treeview from tools/treeview.c)
#   variant                     one word: default | extra | quota | compress
#   modules/*.ko                (quota only) quota_tree, quota_v2, loaded before the job mounts
#                               the image itself (linux-f2fs --no-mount), as the initramfs
#                               lacks them and F2FS's quota feature needs the v2 quota format
#   bigdir_count                (optional) number of entries of the big directory (default 6000)
# Outputs in $OUT: view.txt (treeview, all default fields, sorted), stat.txt (inode number,
# link count, 512-byte blocks, path; sorted by path), status.txt (debugfs), and for the
# compress variant compressed.txt. Exits non-zero at the first failure, naming the step.
set -e
STEP=start
trap 'rc=$?; if [ $rc != 0 ]; then echo "kernel-job: FAILED in step [$STEP] (exit $rc)"; fi' EXIT
P=${PAYLOAD:-/payload}
OUT=${OUT:-/out}
VARIANT=$(cat $P/variant 2>/dev/null || echo default)
BIG=$(cat $P/bigdir_count 2>/dev/null || echo 6000)
T0=$(date +%s)
step() { STEP=$1; echo "kernel-job: [$(( $(date +%s) - T0 ))s] $1"; }
fail() { echo "kernel-job: FAILED: $*"; exit 1; }
setx() { $P/treeview --setxattr "$1" "$2" "$3" || fail "setxattr $1 $2"; }
# hx N SEED: sets HX to N bytes of a deterministic pattern, as hex (for xattr values)
hx() {
  HX=$(awk -v n="$1" -v s="$2" 'BEGIN { for (i = 0; i < n; i++) printf "%02x", (i * 37 + s * 11 + int(i / 256)) % 251 }')
  [ ${#HX} = $(($1 * 2)) ] || fail "hx $1 $2"
}
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
size_is() { s=$(stat -c %s "$1"); [ "$s" = "$2" ] || fail "$1: size $s, expected $2"; }

step "variant $VARIANT, big dir $BIG entries"
SELF_MOUNTED=0
if ! grep -q ' /mnt ' /proc/mounts; then
  step "mount (job-mounted)"
  for m in $P/modules/*.ko; do if [ -f "$m" ]; then insmod "$m" || fail "insmod $m"; fi; done
  mount -t f2fs /dev/vda /mnt || fail "mount"
  SELF_MOUNTED=1
fi
cd /mnt
grep ' /mnt ' /proc/mounts

step "regular files"
mkdir files
: > files/empty
printf 'hello\n' > files/six                                   # 6 bytes, inline
gen small3000 3000 > files/inline3000                           # inline data
gen over4000 4000 > files/over4000                              # past the inline limit: 1 block
gen f40k 40960 > files/f40k
gen f5m 5242880 > files/f5m                                     # inode + direct node(s)
gen f12m 12583035 > files/f12m                                  # 3073 blocks: indirect node
printf 'a' > files/one_byte
gen exact4096 4096 > files/exact4096
head -c 3000 /dev/urandom > files/random3000                    # incompressible, inline
head -c 65536 /dev/urandom > files/random64k
size_is files/f12m 12583035
size_is files/f5m 5242880

step "sparse files"
gen sparseblk 4096 > /tmp/blk
# file blocks: 0 and 1 (inode), 1000 (direct node 1), 2000 (direct node 2), 3000 (indirect 1),
# 1310720 = 5 GiB (indirect 2), 2359296 = 9 GiB and 3145728 = 12 GiB (double indirect)
for b in 0 1 1000 2000 3000 1310720 2359296 3145728; do
  dd if=/tmp/blk of=files/sparse bs=4096 seek=$b count=1 conv=notrunc 2>/dev/null || fail "dd sparse $b"
done
printf 'tail' >> files/sparse                                   # a partial block after the last one
size_is files/sparse $(( 3145729 * 4096 + 4 ))
# data, hole, data, hole at the end (truncate up)
gen holes 8192 > files/holes
dd if=/tmp/blk of=files/holes bs=4096 seek=16 count=2 conv=notrunc 2>/dev/null
truncate -s 1048576 files/holes
# only a hole (truncate up an empty file) and an inline file truncated up past the inline limit
truncate -s 100000 files/allhole
printf 'short' > files/inline_then_grow
truncate -s 20000 files/inline_then_grow
# an unaligned write in the middle of a block, and a file truncated down mid-block
dd if=/tmp/blk of=files/unaligned bs=1 seek=5000 count=100 2>/dev/null
gen shrink 50000 > files/shrink
truncate -s 10001 files/shrink
# fallocate: reserved blocks that were never written (read as zeros)
fallocate -l 65536 files/falloc
printf 'head' > files/falloc_data; fallocate -o 4096 -l 32768 files/falloc_data

step "symlinks"
mkdir links
ln -s ../files/six links/short
ln -s six files/rel_link
long=$(awk 'BEGIN { s = ""; i = 0; while (length(s) < 3900) { s = s sprintf("dir%04d/", i); i++ } print substr(s, 1, 3900) }')
ln -s "$long" links/long3900
t=$(readlink links/long3900); [ "${#t}" = 3900 ] || fail "long symlink target length ${#t}"
ln -s /nonexistent/absolute/target links/dangling
ln -s . links/dot

step "hard links"
mkdir hl1 hl2
gen hardlinked 10000 > hl1/a
ln hl1/a hl1/b
ln hl1/a hl2/c
printf 'x\n' > hl2/solo_with_two
ln hl2/solo_with_two files/second_name

step "special files"
mkdir special
mknod special/null c 1 3
mknod special/loop0 b 7 0
mknod -m 0640 special/bigdev c 254 65537                       # major/minor beyond 8 bits
mkfifo special/fifo
$P/mksock special/socket || fail "mksock"
[ -S special/socket ] || fail "special/socket is not a socket"

step "small directories"
mkdir empty_dir
mkdir small_dir
printf '1\n' > small_dir/one; mkdir small_dir/two; ln -s one small_dir/three   # 3 entries: inline
mkdir odd
: > "odd/with space"
: > "odd/ leading space"
: > "odd/trailing space "
: > "odd/-dash-first"
: > "odd/.hidden"
: > "odd/..dotdot-prefix"
: > "odd/..."
: > "odd/café"
: > "odd/日本語のファイル名"
: > "odd/emoji-🙂🎉"
: > "odd/Ωμέγα"
: > "odd/punct !\"#\$%&'()*+,-.:;<=>?@[\\]^_\`{|}~"
: > "odd/$(printf 'latin1-caf\351')"                             # not UTF-8
: > "odd/$(printf 'high-\200\377\376')"
: > odd/a
: > odd/eight888
: > odd/nine99999
long255=$(awk 'BEGIN { s = ""; for (i = 0; i < 255; i++) s = s substr("abcdefghijklmnopqrstuvwxyz0123456789", i % 36 + 1, 1); print s }')
: > "odd/$long255"
: > "odd/$(awk 'BEGIN { s = ""; for (i = 0; i < 127; i++) s = s "é"; print s "x" }')"   # 255 bytes, 128 chars

step "200-entry directory (inline -> dentry block)"
mkdir dir200
i=0
while [ $i -lt 200 ]; do
  printf '%d\n' $i > dir200/n$i
  i=$((i + 1))
done

step "big directory ($BIG entries)"
mkdir bigdir
L="long-name-$long255"
i=0
while [ $i -lt "$BIG" ]; do
  case $((i % 8)) in
    0) n="e$i";;
    1) n="entry_number_$i";;
    2) n="$i";;
    3) n="x${i}y.txt";;
    4) n="file with spaces $i";;
    5) n="ü-$i-ß";;
    6) if [ $((i % 48)) = 6 ]; then len=$((200 + i % 56)); n="L$i-$L"; n="${n:0:$len}"; else n="n.$i"; fi;;
    7) n="punct!#%+,;=@[]^{}~-$i";;
  esac
  if [ $((i % 10)) = 0 ]; then printf '%d\n' $i > "bigdir/$n"; else : > "bigdir/$n"; fi
  i=$((i + 1))
done
# a few directories, symlinks and odd names among them
for k in 1 2 3 4 5 6 7 8; do mkdir "bigdir/subdir $k"; ln -s "e$((k * 8))" "bigdir/link$k"; done
: > "bigdir/$long255"
: > "bigdir/$(printf 'raw-\351\377')"
: > "bigdir/日本語"
n=$(ls bigdir | wc -l); [ "$n" = $((BIG + 19)) ] || fail "bigdir has $n entries, expected $((BIG + 19))"

step "nested directories"
mkdir -p deep/l1/l2/l3/l4/l5/l6/l7/l8/l9/l10
printf 'bottom\n' > deep/l1/l2/l3/l4/l5/l6/l7/l8/l9/l10/file
printf 'middle\n' > deep/l1/l2/l3/l4/l5/mid

step "xattrs"
mkdir xattr
printf 'x\n' > xattr/file
setx xattr/file user.small 6869                                 # "hi"
setx xattr/file trusted.t 74727573746564
setx xattr/file security.s 736563
setx xattr/file user.empty ""
mkdir xattr/dir
setx xattr/dir user.d 646972
setx xattr/dir trusted.dt 01020304
setx xattr/dir security.ds ff00ff
setx small_dir user.inline_dir 31
ln -s file xattr/symlink
setx xattr/symlink trusted.on_symlink 6c6e6b                    # user.* is not allowed on symlinks
printf 'big\n' > xattr/big
hx 50 1; setx xattr/big user.a "$HX"
hx 1500 2; setx xattr/big user.big "$HX"                    # spills into the xattr node
gen xattr_bigdata 20000 > xattr/big_with_data
hx 1500 3; setx xattr/big_with_data user.big "$HX"
printf 'huge\n' > xattr/huge
hx 3500 4; setx xattr/huge user.huge "$HX"                  # mostly in the xattr node
printf 'many\n' > xattr/many
i=0
while [ $i -lt 60 ]; do
  hx $((i % 23 + 1)) $i; setx xattr/many "user.attr_$i" "$HX"
  i=$((i + 1))
done
hx 40 99; setx xattr/many user.attr_7 "$HX"                 # replace a value
setx xattr/many trusted.many 00
setx . user.root_attr 726f6f74
setx bigdir user.on_bigdir 6269676469

step "owners and modes"
mkdir perms
for m in 0600 0755 4755 2755 0444 0000 0777; do printf 'mode %s\n' $m > perms/f$m; chmod $m perms/f$m; done
mkdir perms/sticky; chmod 1777 perms/sticky
mkdir perms/private; chmod 0700 perms/private
printf 'u1000\n' > perms/u1000; chown 1000:1000 perms/u1000
printf 'g5\n' > perms/g5; chown 0:5 perms/g5
printf 'nobody\n' > perms/nobody; chown 65534:65534 perms/nobody
chown 1000:1000 perms/private
chown -h 1000:5 links/short
chown 65534:65534 perms/sticky
mkdir perms/owned; chown 123456:654321 perms/owned
chmod 4755 perms/f4755 && chown 1000:1000 perms/f4755 && chmod 4755 perms/f4755   # chown clears setuid

if [ "$VARIANT" = compress ]; then
  step "compressed files"
  mkdir compr
  # cfile PATH ALG LOG SIZE: empty file, compression on (ALG "mount": the mount's defaults,
  # lz4 with 4-block clusters), then SIZE bytes of data
  cfile() {
    : > "$1"
    if [ "$2" = mount ]; then $P/setcompr "$1" || fail "setcompr $1"; else $P/setcompr "$1" "$2" "$3" || fail "setcompr $1 $2 $3"; fi
    gen "$1" "$4" > "$1"
  }
  cfile compr/lz4_default mount 2 1048576
  cfile compr/lz4_c16 1 4 1048576
  cfile compr/zstd_c8 2 3 1000000                                 # last cluster partial
  cfile compr/lzo_c4 0 2 409600
  cfile compr/lzorle_c4 3 2 409600
  cfile compr/small 1 2 100                                       # not inline: compressed files never are
  # incompressible clusters (stored raw) between compressible ones
  cfile compr/mixed 1 2 65536
  head -c 32768 /dev/urandom | dd of=compr/mixed bs=4096 seek=16 conv=notrunc 2>/dev/null
  gen mixedtail 65536 | dd of=compr/mixed bs=4096 seek=24 conv=notrunc 2>/dev/null
  # holes inside a compressed file (partial clusters, whole-cluster holes, a hole at the end)
  cfile compr/sparse 1 2 0
  dd if=/tmp/blk of=compr/sparse bs=4096 seek=0 count=1 conv=notrunc 2>/dev/null
  dd if=/tmp/blk of=compr/sparse bs=4096 seek=2 count=1 conv=notrunc 2>/dev/null
  gen sparsemid 65536 | dd of=compr/sparse bs=4096 seek=100 conv=notrunc 2>/dev/null
  truncate -s 2000000 compr/sparse
  # a cluster rewritten after the file was written back
  cfile compr/rewritten 1 2 262144
  sync
  printf 'overwritten in the middle of a cluster' | dd of=compr/rewritten bs=1 seek=20000 conv=notrunc 2>/dev/null
  # a directory with the flag: new files inherit it
  mkdir compr/dir; $P/setcompr compr/dir
  gen inherit 300000 > compr/dir/inherited
  cp compr/lz4_default compr/dir/copied
  # plain (uncompressed) files beside them; plain_same_bytes has the bytes of lz4_default
  gen compr/lz4_default 1048576 > compr/plain_same_bytes
  gen plain 200000 > compr/plain
  sync
  # One line per compressed file. hash= is treeview's hash of the bytes as read, taken on a
  # tmpfs copy. Linux 6.1's SEEK_DATA skips the leading COMPRESS_ADDR block of a compressed
  # cluster; treeview reads from the cluster's start, so its hash on /mnt (view.txt) is the
  # same, and the job checks that it is.
  C=$OUT/compressed.txt; : > $C
  while read f alg log; do
    [ -n "$($P/setcompr --blocks "$f" 2>/dev/null)" ] || fail "$f is not a compressed file"
    cp "$f" /tmp/copy
    h=$($P/treeview -f hash /tmp/copy | cut -f2)
    [ "$h" = "$($P/treeview -f hash "$f" | cut -f2)" ] || fail "$f: hash through F2FS differs from its copy"
    sum=$(sha256sum < "$f" | cut -d' ' -f1)
    [ "$sum" = "$(sha256sum < /tmp/copy | cut -d' ' -f1)" ] || fail "$f: copy differs"
    printf '%s\talgorithm=%s\tlog_cluster_size=%s\tcompr_blocks=%s\t%s\tsha256=%s\n' "$f" $alg $log "$($P/setcompr --blocks "$f")" "$h" "$sum" >> $C
    rm /tmp/copy
  done <<EOF_LIST
compr/lz4_default lz4 2
compr/lz4_c16 lz4 4
compr/zstd_c8 zstd 3
compr/lzo_c4 lzo 2
compr/lzorle_c4 lzo-rle 2
compr/small lz4 2
compr/mixed lz4 2
compr/sparse lz4 2
compr/rewritten lz4 2
compr/dir/inherited lz4 2
compr/dir/copied lz4 2
EOF_LIST
  cat $C
  # self-check: the true hash of copied equals the plain file's hash through the kernel
  hp=$($P/treeview -f hash compr/plain_same_bytes | cut -f2)
  grep -q "^compr/dir/copied	.*	$hp	" $C || fail "hash of compr/dir/copied ($hp expected) differs from the plain copy"
  if $P/setcompr --blocks compr/plain >/dev/null 2>&1; then fail "compr/plain is compressed"; fi
fi

step "mtimes"
touch -d '2001-02-03 04:05:06' files/six files/f40k special/fifo
touch -d '@0' files/empty
touch -d '@-86400' files/one_byte                              # before 1970
touch -d '@4102444800' files/exact4096                          # 2100, past 2038
touch -d '1999-12-31 23:59:59' perms/sticky small_dir odd deep/l1/l2/l3
touch -d '@1234567890' hl1/a

step "sync and record"
sync
# self-check of treeview's hole-skipping hash on this kernel: a plain file's hash through F2FS
# must equal the hash of a tmpfs copy (files/sparse, 12 GiB, is left out)
for f in files/* hl1/a xattr/big_with_data; do
  if [ -f "$f" ] && [ ! -L "$f" ] && [ "$f" != files/sparse ]; then
    cp "$f" /tmp/copy
    [ "$($P/treeview -f hash "$f" | cut -f2)" = "$($P/treeview -f hash /tmp/copy | cut -f2)" ] || fail "$f: hash through F2FS differs from its copy"
    rm /tmp/copy
  fi
done
$P/treeview /mnt | sort > $OUT/view.txt || fail "treeview"
cd /mnt && find . -exec stat -c '%i	%h	%b	%n' {} + | sort -t '	' -k4 > $OUT/stat.txt
cd /mnt
wc -l $OUT/view.txt $OUT/stat.txt
cat /sys/kernel/debug/f2fs/status > $OUT/status.txt 2>/dev/null || true
df /mnt
if [ $SELF_MOUNTED = 1 ]; then
  step "umount (job-mounted)"
  cd /
  umount /mnt || fail "umount"
fi
step "done"
