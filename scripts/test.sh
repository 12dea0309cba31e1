#!/usr/bin/env bash
# Every test: formatting, lints, unit tests, and the integration tests that run the real
# binary on images made by mkfs.f2fs/sload.f2fs and by Linux (tests/fixtures), judged by
# fsck.f2fs and by Linux's own view of each tree, and the POSIX judges (pjdfstest, a short
# fsx) on the FUSE mount. This is what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/judges.sh >/dev/null
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
# The fuzz targets live outside the workspace (cargo-fuzz builds them with nightly flags):
# type-check them here so that they do not rot between fuzzing runs.
cargo check --quiet --manifest-path fuzz/Cargo.toml
cargo nextest run --workspace --profile ci
