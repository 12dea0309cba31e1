#!/usr/bin/env bash
# The main job on an embedded default: builds uf2fs, makes a 128 MiB F2FS image with
# mkfs.f2fs and fills it with sload.f2fs from a sample tree (this repository's own sources
# plus generated files: a large file, a sparse-looking file, symlinks, a hard link, a
# 600-entry directory), then shows it with uf2fs (info, ls, stat, cat), extracts it and
# compares the extracted tree with the source.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo build --release --quiet
U=target/release/uf2fs
W=target/demo; rm -rf "$W"; mkdir -p "$W/src"
cp -a crates docs README.md "$W/src/" 2>/dev/null || cp -a crates "$W/src/"
head -c 20000000 /dev/urandom > "$W/src/random-20MB.bin"
printf 'hello from uf2fs\n' > "$W/src/hello.txt"
ln -s hello.txt "$W/src/hello-link"; ln "$W/src/hello.txt" "$W/src/hello-hardlink"
mkdir "$W/src/many"; for i in $(seq 1 600); do echo "$i" > "$W/src/many/entry-$i"; done
truncate -s 128M "$W/demo.img"
mkfs.f2fs -f -q "$W/demo.img"
sload.f2fs -f "$W/src" "$W/demo.img" >/dev/null
echo "== uf2fs info"; $U info "$W/demo.img"
echo; echo "== uf2fs ls -l /"; $U ls -l "$W/demo.img" /
echo; echo "== uf2fs stat /random-20MB.bin"; $U stat "$W/demo.img" /random-20MB.bin
echo; echo "== uf2fs cat /hello-link"; $U cat "$W/demo.img" /hello-link
echo; echo "== uf2fs extract"; $U extract "$W/demo.img" "$W/out"
diff -r --no-dereference "$W/src" "$W/out" && echo "extracted tree equals the source: OK"
../shared/tools/f2fs-check "$W/demo.img" || true

echo; echo "== the same tree written by uf2fs itself: uf2fs mkfs + uf2fs import"
$U mkfs "$W/ours.img" --size 128M
$U import --stats "$W/ours.img" "$W/src"
../shared/tools/f2fs-check "$W/ours.img"
$U extract "$W/ours.img" "$W/out2"
diff -r --no-dereference "$W/src" "$W/out2" && echo "uf2fs-made image extracts to the source: OK"
$U info "$W/ours.img" | grep -E 'checkpoint|valid blocks|free segments'
