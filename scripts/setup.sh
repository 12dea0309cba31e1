#!/usr/bin/env bash
# Installs what uf2fs's build, demo and tests need on a fresh Debian 12 machine (as root).
# Idempotent: installs only what is missing. The Rust toolchain itself is expected.
set -euo pipefail

need=()
have() { command -v "$1" >/dev/null 2>&1; }
have mkfs.f2fs && have sload.f2fs && have fsck.f2fs || need+=(f2fs-tools)
have gcc || need+=(gcc)
# scripts/test.sh type-checks the fuzz targets: libfuzzer-sys's build script compiles
# libFuzzer's C++ even for `cargo check`.
have g++ || need+=(g++)
have fusermount3 || need+=(fuse3)
# tools/treeview.c and the linux-f2fs payloads are linked static: they need libc.a.
[ -f /usr/lib/x86_64-linux-gnu/libc.a ] || need+=(libc6-dev)
have gzip || need+=(gzip)
have img2simg || need+=(android-sdk-libsparse-utils)   # the sparse-image tests: img2simg is the judge
have man || need+=(man-db)   # the CLI tests render the manual pages
have fio || need+=(fio)   # uf2fs-bench io's block workloads (the benchmark, not the tests)
# uf2fs-format's lzo_with_liblzo2 test: liblzo2 judges the LZO encoder's streams.
[ -f /usr/include/lzo/lzo1x.h ] || need+=(liblzo2-dev)
# tools/linux-f2fs (the tests that run Linux's own F2FS, part of scripts/test.sh) boots
# Debian's kernel under qemu with a busybox initramfs.
have qemu-system-x86_64 || need+=(qemu-system-x86)
have cpio || need+=(cpio)
dpkg-query -W -f '${Status}' busybox-static 2>/dev/null | grep -q 'ok installed' || need+=(busybox-static)
ls /boot/vmlinuz-*-amd64 >/dev/null 2>&1 || need+=(linux-image-amd64)
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

have cargo || { echo "setup: cargo not found: install the Rust toolchain (rustup) first" >&2; exit 1; }
rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt clippy
have cargo-deb || cargo install --locked cargo-deb   # scripts/deb.sh: the Debian package
have cargo-nextest || cargo install --locked cargo-nextest

# FUSE over io_uring (Linux 6.14+): the kernel offers it to FUSE daemons only while the fuse
# module's enable_uring parameter is on. uf2fs then serves per-CPU queues instead of
# /dev/fuse (docs/design.md, "FUSE over io_uring"); daemons that do not ask keep /dev/fuse.
# Kernels without the parameter are left as they are.
uring=/sys/module/fuse/parameters/enable_uring
[ -e "$uring" ] || modprobe fuse 2>/dev/null || true
if [ -w "$uring" ] && [ "$(cat "$uring")" != Y ]; then
  echo Y > "$uring" && echo "setup: turned on FUSE over io_uring ($uring)" >&2
fi
