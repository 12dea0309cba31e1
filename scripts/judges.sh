#!/usr/bin/env bash
# Installs the two POSIX judges we run against a uf2fs FUSE mount, at pinned versions,
# into target/judges/bin of this checkout (nothing goes into ~/.cargo/bin):
#   pjdfstest  - POSIX syscall conformance suite (Rust port); config: scripts/judges/pjdfstest.toml
#   fsx        - random read/write/mmap/truncate exerciser that checks every byte read back;
#                config: scripts/judges/fsx.toml
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
install fsx "$FSX_VERSION"

echo "pjdfstest: $root/bin/pjdfstest ($("$root/bin/pjdfstest" --version))"
echo "fsx:       $root/bin/fsx ($("$root/bin/fsx" --version))"
