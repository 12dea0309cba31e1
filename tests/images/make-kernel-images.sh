#!/usr/bin/env bash
# make-kernel-images.sh: regenerate the Linux-written F2FS fixtures in tests/fixtures/.
#
#   bash tests/images/make-kernel-images.sh [VARIANT...]      (from the repository root)
#
# For each variant: a fresh image made by the host's mkfs.f2fs (f2fs-tools 1.15), filled by the
# real Linux kernel (Debian's 6.1 under qemu, through tools/linux-f2fs) running
# tests/images/kernel-job.sh, which builds the same rich tree in every variant and records the
# kernel's own view of it. The run must exit 0, leave no F2FS error or warning in dmesg, and the
# image must pass tools/f2fs-verdict. Then it stores, replacing earlier copies:
#   tests/fixtures/NAME.img.gz       the image after Linux unmounted it (gzip -9 -n)
#   tests/fixtures/NAME.view.txt     `treeview /mnt | sort` in the guest (all default fields)
#   tests/fixtures/NAME.stat.txt     inode number, link count, st_blocks (512 B), path (guest)
#   tests/fixtures/NAME.status.txt   /sys/kernel/debug/f2fs/status after the job's sync
#   tests/fixtures/linux-compress.compressed.txt   compressed files and their compr_blocks
#
# Variants (default: all four):
#   linux-default   mkfs.f2fs -f -q (defaults)
#   linux-extra     -O extra_attr,inode_checksum,flexible_inline_xattr,inode_crtime,lost_found,sb_checksum
#   linux-quota     -O extra_attr,quota,project_quota. The kernel turns quota accounting on at
#                   mount, which needs the quota_v2 format module; linux-f2fs's initramfs only
#                   carries f2fs and its dependencies, so this variant ships quota_tree.ko and
#                   quota_v2.ko in the payload and runs with --no-mount: the job loads them and
#                   mounts (and unmounts) the image itself.
#   linux-compress  -O extra_attr,compression; the job also writes compressed files (setcompr.c
#                   sets FS_COMPR_FL and the per-file algorithm: busybox has no chattr).
# Environment: BIGDIR=N entries in the big directory (default 6000), TIMEOUT=S per VM (1500),
# IMAGE_MB=N image size (256).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
tools=tools
fix=tests/fixtures
job=tests/images/kernel-job.sh
bigdir=${BIGDIR:-6000}
timeout=${TIMEOUT:-1500}
image_mb=${IMAGE_MB:-256}
variants=("$@")
[ ${#variants[@]} -gt 0 ] || variants=(linux-default linux-extra linux-quota linux-compress)

die() { echo "make-kernel-images: $*" >&2; exit 1; }
for t in mkfs.f2fs fsck.f2fs gcc gzip; do command -v $t >/dev/null || die "$t missing (apt-get install f2fs-tools gcc gzip)"; done
[ -x $tools/linux-f2fs ] && [ -x $tools/f2fs-verdict ] && [ -f $tools/treeview.c ] || die "no $tools/linux-f2fs, f2fs-verdict or treeview.c"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# static helpers for the guest
base=$work/payload
mkdir -p "$base"
gcc -O2 -static -Wall -o "$base/treeview" $tools/treeview.c
gcc -O2 -static -Wall -o "$base/mksock" tests/images/mksock.c
gcc -O2 -static -Wall -o "$base/setcompr" tests/images/setcompr.c
echo "$bigdir" > "$base/bigdir_count"

# the kernel that linux-f2fs boots (same choice as that script), for the quota modules
kver=$(ls /boot/vmlinuz-*-amd64 2>/dev/null | grep -v cloud | sort -V | tail -1 | sed 's|^/boot/vmlinuz-||')

mkdir -p $fix
summary=()
for name in "${variants[@]}"; do
  extra_args=()
  case $name in
    linux-default)  mkfs_opts=(); word=default;;
    linux-extra)    mkfs_opts=(-O extra_attr,inode_checksum,flexible_inline_xattr,inode_crtime,lost_found,sb_checksum); word=extra;;
    linux-quota)    mkfs_opts=(-O extra_attr,quota,project_quota); word=quota; extra_args=(--no-mount);;
    linux-compress) mkfs_opts=(-O extra_attr,compression); word=compress;;
    *) die "unknown variant $name";;
  esac
  echo "== $name: mkfs.f2fs -f -q ${mkfs_opts[*]} (${image_mb} MiB), big dir $bigdir entries"
  payload=$work/payload-$name
  cp -a "$base" "$payload"
  echo $word > "$payload/variant"
  if [ $word = quota ]; then
    mkdir -p "$payload/modules"
    for m in quota_tree quota_v2; do  # insmod order: dependency first
      f=/lib/modules/$kver/kernel/fs/quota/$m.ko
      [ -f "$f" ] || die "$f missing: the quota variant needs it"
      cp "$f" "$payload/modules/$( [ $m = quota_tree ] && echo 1 || echo 2)-$m.ko"
    done
  fi
  img=$work/$name.img
  truncate -s ${image_mb}M "$img"
  mkfs.f2fs -f -q "${mkfs_opts[@]}" "$img"
  out=$work/$name.out
  t0=$(date +%s)
  rc=0
  $tools/linux-f2fs --out "$out" --payload "$payload" --timeout "$timeout" "${extra_args[@]}" "$img" $job || rc=$?
  secs=$(( $(date +%s) - t0 ))
  echo "   kernel run: ${secs}s, job exit $rc"
  if [ $rc != 0 ]; then
    keep=${TMPDIR:-/tmp}/make-kernel-images.$name.out; rm -rf "$keep"; cp -a "$out" "$keep" 2>/dev/null || true
    tail -25 "$out/job.log" 2>/dev/null || tail -25 "$out/console.log" 2>/dev/null || true
    die "$name: the kernel job failed (exit $rc); its results are in $keep"
  fi
  keep=${TMPDIR:-/tmp}/make-kernel-images.$name.out; rm -rf "$keep"; cp -a "$out" "$keep"   # for inspection
  bad=$(grep 'F2FS-fs' "$out/dmesg.txt" | grep -iE 'inconsisten|corrupt|fsck|error|warn|fail|invalid|bug' || true)
  [ -z "$bad" ] || die "$name: the kernel complained in dmesg:
$bad"
  grep 'F2FS-fs' "$out/dmesg.txt" | sed 's/^/   dmesg: /' || true
  [ -s "$out/files/view.txt" ] || die "$name: the job wrote no view.txt"
  LC_ALL=C sort -c "$out/files/view.txt" 2>/dev/null || die "$name: view.txt is not in byte order"
  sum=$(sha256sum < "$img")
  $tools/f2fs-verdict "$img" || die "$name: fsck.f2fs does not find the image clean"
  [ "$(sha256sum < "$img")" = "$sum" ] || die "$name: f2fs-verdict changed the image"

  gzip -9 -n < "$img" > "$work/$name.img.gz"
  mv "$work/$name.img.gz" $fix/$name.img.gz
  cp "$out/files/view.txt" $fix/$name.view.txt
  cp "$out/files/stat.txt" $fix/$name.stat.txt
  cp "$out/files/status.txt" $fix/$name.status.txt
  if [ $word = compress ]; then cp "$out/files/compressed.txt" $fix/$name.compressed.txt; fi
  size=$(stat -c %s $fix/$name.img.gz)
  summary+=("$name: kernel run ${secs}s, $(wc -l < $fix/$name.view.txt) entries, img.gz $size bytes")
done
echo "== done"
printf '   %s\n' "${summary[@]}"
