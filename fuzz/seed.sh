#!/bin/sh
# Writes the seed corpora of every fuzz target into fuzz/corpus/<target>/ from the fixture
# images in tests/fixtures (see examples/seed.rs). Safe to rerun: seeds are overwritten, found
# corpus entries are kept.
set -eu
cd "$(dirname "$0")"
cargo run --release --example seed
