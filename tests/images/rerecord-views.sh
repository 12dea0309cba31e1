#!/usr/bin/env bash
# rerecord-views.sh: record Linux's view of the committed fixture images again, keeping the
# images as they are. Use it when tools/treeview.c changes what it prints (its hash, say):
# the views in tests/fixtures must be what the current treeview shows through Linux, and
# regenerating the images themselves (make-kernel-images.sh) would change their bytes too.
#
#   bash tests/images/rerecord-views.sh [NAME...]      (from the repository root)
#
# For each fixture (default: every linux-* image that has a view), Linux 6.1 mounts a copy
# read-only through tools/linux-f2fs and runs tests/images/view-job.sh. The copy must come
# back unchanged and dmesg must hold no F2FS complaint; then NAME.view.txt (and, for
# linux-compress, the hash= column of linux-compress.compressed.txt) is replaced.
# Needs what tools/linux-f2fs needs, gcc with a static libc, and gzip.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
fix=tests/fixtures
die() { echo "rerecord-views: $*" >&2; exit 1; }
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for v in $fix/linux-*.view.txt; do names+=("$(basename "$v" .view.txt)"); done
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -O2 -static -Wall -o "$work/treeview" tools/treeview.c
kver=$(ls /boot/vmlinuz-*-amd64 2>/dev/null | grep -v -- -cloud- | sort -V | tail -n 1 | sed 's|^/boot/vmlinuz-||')
for name in "${names[@]}"; do
  [ -f $fix/$name.img.gz ] || die "no $fix/$name.img.gz"
  payload=$work/payload-$name
  mkdir -p "$payload"
  cp "$work/treeview" "$payload/"
  args=(--mount-opts ro)
  if [ "$name" = linux-quota ]; then
    # the quota feature needs the v2 quota format, which the harness does not load
    mkdir -p "$payload/modules"
    cp /lib/modules/$kver/kernel/fs/quota/quota_tree.ko "$payload/modules/1-quota_tree.ko"
    cp /lib/modules/$kver/kernel/fs/quota/quota_v2.ko "$payload/modules/2-quota_v2.ko"
    args=(--no-mount)
  fi
  if [ -f $fix/$name.compressed.txt ]; then cp $fix/$name.compressed.txt "$payload/compressed.txt"; fi
  img=$work/$name.img
  gzip -dc $fix/$name.img.gz > "$img"
  before=$(sha256sum < "$img")
  out=$work/$name.out
  tools/linux-f2fs --out "$out" --payload "$payload" "${args[@]}" "$img" tests/images/view-job.sh ||
    { tail -n 20 "$out/job.log" 2>/dev/null; die "$name: the view job failed"; }
  [ "$(sha256sum < "$img")" = "$before" ] || die "$name: the read-only mount changed the image"
  bad=$(grep 'F2FS-fs' "$out/dmesg.txt" | grep -iE 'inconsisten|corrupt|fsck|error|warn|fail|invalid|bug' || true)
  [ -z "$bad" ] || die "$name: the kernel complained: $bad"
  LC_ALL=C sort -c "$out/files/view.txt" || die "$name: view.txt is not in byte order"
  [ "$(wc -l < "$out/files/view.txt")" = "$(wc -l < $fix/$name.view.txt)" ] ||
    die "$name: the new view has another number of entries than the old one"
  cp "$out/files/view.txt" $fix/$name.view.txt
  if [ -f "$out/files/compressed.txt" ]; then cp "$out/files/compressed.txt" $fix/$name.compressed.txt; fi
  echo "rerecord-views: $name: $(wc -l < $fix/$name.view.txt) entries"
done
