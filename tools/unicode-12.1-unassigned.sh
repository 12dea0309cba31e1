#!/bin/bash
# Regenerates crates/format/src/casefold_tables.rs: the code points that Unicode 12.1 leaves
# unassigned (General_Category=Cn), the version of Linux 6.1's utf8 casefolding tables.
# Uses the unicodedata2 12.1.0 sources from PyPI (Unicode's data compiled for Python); the
# extension is built by hand because its setup.py predates Python 3.10.
set -euo pipefail
out=$(realpath -m "${1:-crates/format/src/casefold_tables.rs}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
pip download --quiet --no-deps --no-binary :all: unicodedata2==12.1.0 -d .
tar xzf unicodedata2-12.1.0.tar.gz
cd unicodedata2-12.1.0
printf '#include <Python.h>\n' > unicodedata2/py3/ucnhash.h
sed -i 's/Py_TYPE(&UCD_Type) = &PyType_Type;/Py_SET_TYPE(\&UCD_Type, \&PyType_Type);/' unicodedata2/py3/unicodedata.c
python3 setup.py --quiet build_ext --inplace >/dev/null
cd "$work"
PYTHONPATH="$work/unicodedata2-12.1.0" python3 - > "$work/table.rs" <<'PY'
import unicodedata2 as u
assert u.unidata_version == "12.1.0"
ranges, start = [], None
for cp in range(0x110000):
    cn = u.category(chr(cp)) == "Cn"
    if cn and start is None:
        start = cp
    if not cn and start is not None:
        ranges.append((start, cp - 1))
        start = None
if start is not None:
    ranges.append((start, 0x10FFFF))
print("//! Code points unassigned in Unicode 12.1 (General_Category=Cn in its character database),")
print("//! as ranges. Linux 6.1's utf8 tables are built from 12.1 data: there these code points have no")
print("//! decomposition, no case folding and combining class 0, whatever later versions give them.")
print("//! Made by `tools/unicode-12.1-unassigned.sh` (Unicode data; no kernel code).")
print()
print("/// Inclusive ranges, ascending and disjoint.")
print("pub(crate) const UNASSIGNED_12_1: [(u32, u32); %d] = [" % len(ranges))
for a, b in ranges:
    print("    (0x%X, 0x%X)," % (a, b))
print("];")
PY
cp "$work/table.rs" "$out"
