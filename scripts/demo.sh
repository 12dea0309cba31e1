#!/usr/bin/env bash
# The main job on an embedded default: builds uf2fs, makes a default 256 MiB F2FS image,
# mounts it through FUSE, runs a short workload (a tree copied in with cp -a, files appended,
# overwritten, renamed and deleted, fsync), prints `uf2fs status`, unmounts, checks the image
# with fsck.f2fs, mounts it again and compares it with what was written.
# UF2FS_BIN=PATH runs that binary instead of building one (the lone-clone test does, to
# check the scripts without a second build).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ -n "${UF2FS_BIN:-}" ]; then
  U=$UF2FS_BIN
else
  cargo build --release --quiet
  U=$PWD/target/release/uf2fs
fi
W=$PWD/target/demo
mountpoint -q "$W/mnt" 2>/dev/null && "$U" umount "$W/mnt"
rm -rf "$W"; mkdir -p "$W/src" "$W/mnt"

# The sample tree: this repository's sources plus a large file, links and a big directory.
cp -a crates docs README.md "$W/src/"
head -c 20000000 /dev/urandom > "$W/src/random-20MB.bin"
printf 'hello from uf2fs\n' > "$W/src/hello.txt"
ln -s hello.txt "$W/src/hello-link"; ln "$W/src/hello.txt" "$W/src/hello-hardlink"
mkdir "$W/src/many"; for i in $(seq 1 600); do echo "$i" > "$W/src/many/entry-$i"; done

echo "== uf2fs mkfs (default features, 256 MiB)"
"$U" mkfs "$W/demo.img" --size 256M
echo; echo "== uf2fs mount"
"$U" mount "$W/demo.img" "$W/mnt"
grep " $W/mnt " /proc/mounts

echo; echo "== workload: cp -a, append, overwrite, rename, delete, fsync"
time cp -a "$W/src" "$W/mnt/tree"
# The same changes on the host copy, so that both can be compared at the end.
for d in "$W/src" "$W/mnt/tree"; do
  printf 'appended line\n' >> "$d/hello.txt"
  dd if=/dev/zero of="$d/random-20MB.bin" bs=4096 seek=100 count=256 conv=notrunc status=none
  mv "$d/many" "$d/renamed-many"
  rm -r "$d/crates/engine/src"
  head -c 3000000 /dev/urandom > "$d/fresh.bin" 2>/dev/null || true
done
cp "$W/mnt/tree/fresh.bin" "$W/src/fresh.bin"
sync "$W/mnt/tree/fresh.bin"          # fsync of one file
echo; echo "== uf2fs status (live mount)"
"$U" status "$W/mnt"

echo; echo "== uf2fs umount (returns after the final checkpoint)"
"$U" umount "$W/mnt"
tools/f2fs-verdict "$W/demo.img"

echo; echo "== mounted again: the tree equals what was written"
"$U" mount -o ro "$W/demo.img" "$W/mnt"
diff -r --no-dereference "$W/src" "$W/mnt/tree" && echo "diff -r: identical"
"$U" umount "$W/mnt"
echo; echo "== uf2fs status (the image, from its checkpoint)"
"$U" status "$W/demo.img"
