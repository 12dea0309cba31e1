#!/usr/bin/env bash
# Installs the two POSIX judges we run against a uf2fs FUSE mount, at pinned versions,
# into target/judges/bin of this checkout (nothing goes into ~/.cargo/bin):
#   pjdfstest  - POSIX syscall conformance suite (Rust port); config: scripts/judges/pjdfstest.toml
#   fsx        - random read/write/mmap/truncate exerciser that checks every byte read back;
#                config: scripts/judges/fsx.toml; built with two fixes (see below)
# Safe to run again: a tool already installed at the pinned version is left alone.
# Needs cargo, and (as root, on Debian) installs libacl1-dev, which pjdfstest links against.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD/target/judges"
PJDFSTEST_VERSION=0.2.2
FSX_VERSION=0.3.2

command -v cargo >/dev/null || { echo "judges: cargo not found" >&2; exit 1; }

# pjdfstest's ACL crate links -lacl at build time; the .so link comes with libacl1-dev.
if ! dpkg -s libacl1-dev >/dev/null 2>&1; then
  echo "judges: installing libacl1-dev" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends libacl1-dev >/dev/null
fi

# install NAME VERSION: build NAME from crates.io unless the pinned version is already there.
install() {
  local bin="$root/bin/$1"
  if [ -x "$bin" ] && "$bin" --version 2>/dev/null | grep -qx "$1 $2"; then
    return
  fi
  echo "judges: installing $1 $2 (about 30 s)" >&2
  cargo install --quiet --locked --force --root "$root" --version "=$2" "$1"
}
install pjdfstest "$PJDFSTEST_VERSION"

# fsx 0.3.2 as published cannot run a million operations on any Linux file system (tmpfs
# included), so we build it from the pinned crate with scripts/judges/fsx-0.3.2.patch:
#  - its mapread never unmaps: every mapread leaks a mapping until mmap fails with ENOMEM at
#    vm.max_map_count (~380 000 operations), each operation slower than the last before that;
#  - it issues posix_fallocate with length 0, which Linux refuses with EINVAL before any file
#    system sees it, and fsx takes that as "not supported" and exits 1.
# The patch unmaps after mapread and skips zero-length fallocates (as fsx skips every other
# zero-length operation); the operation sequence of a seed is otherwise unchanged.
FSX_SHA256=72680bb1e43d40729d5f6e9de5bbe604820ff51e4707e109cb5082ec67d022a2
fsx_patch="$PWD/scripts/judges/fsx-$FSX_VERSION.patch"
fsx_stamp="$root/fsx.patched"
want="$FSX_VERSION $(sha256sum "$fsx_patch" | cut -d' ' -f1)"
if [ ! -x "$root/bin/fsx" ] || [ "$(cat "$fsx_stamp" 2>/dev/null)" != "$want" ]; then
  echo "judges: building fsx $FSX_VERSION with our patch (about 30 s)" >&2
  for t in curl patch; do
    command -v "$t" >/dev/null || { apt-get update -qq >/dev/null; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$t" >/dev/null; }
  done
  build="$root/fsx-src"; rm -rf "$build"; mkdir -p "$build"
  curl -sSfL -o "$build.crate" "https://static.crates.io/crates/fsx/fsx-$FSX_VERSION.crate"
  echo "$FSX_SHA256  $build.crate" | sha256sum -c --quiet -
  tar -xzf "$build.crate" -C "$build" --strip-components=1
  patch -s -d "$build" -p1 < "$fsx_patch"
  # Its own workspace, not ours (the build directory is inside this checkout).
  printf '\n[workspace]\n' >> "$build/Cargo.toml"
  cargo install --quiet --locked --force --root "$root" --path "$build"
  echo "$want" > "$fsx_stamp"
fi

echo "pjdfstest: $root/bin/pjdfstest ($("$root/bin/pjdfstest" --version))"
echo "fsx:       $root/bin/fsx ($("$root/bin/fsx" --version))"
