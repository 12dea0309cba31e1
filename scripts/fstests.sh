#!/usr/bin/env bash
# Runs fstests' "generic" tests against uf2fs through its FUSE mount (fstests' FSTYP=fuse),
# and judges the image after every test with tools/f2fs-verdict (fsck.f2fs).
#
#   FSTESTS_SRC=/path/to/xfstests-dev bash scripts/fstests.sh [--setup-only] [CHECK_ARGS...]
#
# CHECK_ARGS go to fstests' ./check (default: -g generic/quick); e.g. `generic/001 generic/013`.
# Every generic test: `-g all` (with FSTYP=fuse "all" is the generic tests; `-g generic` is
# an empty group). Three tests (generic/590, 694, 701) need more room than the default 4G
# images and skip themselves there; FSTESTS_IMAGE_SIZE=12G runs them.
# Get the fstests source once with
#   git clone https://git.kernel.org/pub/scm/fs/xfs/xfstests-dev.git
# This script (as root, Debian 12): installs fstests' build and run dependencies with apt,
# builds a copy of $FSTESTS_SRC in $FSTESTS_WORK/fstests (your checkout is not modified) and
# patches its common/rc (see patch_common_rc), formats two image files with `uf2fs mkfs`
# (TEST_DEV and SCRATCH_DEV), installs scripts/mount.fuse.uf2fs (the package's mount helper)
# as /sbin/mount.fuse.uf2fs for the run (what was there is put back), writes local.config, runs
# ./check with scripts/fstests-exclude.txt as the exclusion list, and writes a summary
# (passed / run / not run / failed / excluded) to $FSTESTS_WORK/summary.txt.
#
# Environment (all optional except FSTESTS_SRC):
#   FSTESTS_SRC         fstests source tree (has ./check and common/rc)
#   FSTESTS_WORK        work directory [/var/tmp/uf2fs-fstests]
#   FSTESTS_IMAGE_SIZE  size of each image [4G]
#   FSTESTS_MOUNT_OPTS  FUSE mount options for both file systems [allow_other,default_permissions]
#   FSTESTS_EXCLUDE     exclusion list [scripts/fstests-exclude.txt]
#   UF2FS               uf2fs binary [target/release/uf2fs, built here with cargo]
#   F2FS_CHECK          post-test checker, called as `F2FS_CHECK IMAGE` [tools/f2fs-verdict]
#
# What uf2fs's mount must do for fstests (the helper relies on it):
#   - `uf2fs mount SOURCE DIR -o OPTS` (run by the helper) returns once the mount is live,
#     accepts the generic options mount(8) passes (rw, ro, nosuid, nodev, noexec, relatime,
#     noatime, ...) besides allow_other and default_permissions, and writes everything back
#     before its daemon exits, holding its image's lock until then;
#   - the mount's source in /proc/mounts is SOURCE exactly (FUSE fsname=SOURCE): fstests finds
#     and unmounts its file systems by `findmnt -S $TEST_DEV` and `umount $TEST_DEV`.
#   The type may be "fuse" or "fuse.uf2fs" (the patched _fs_type accepts both).
#   A second mount of an image already mounted (generic/732 mounts SCRATCH_DEV twice, as a
#   kernel file system allows) is made by the helper as a bind mount of the first one.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

SETUP_ONLY=0
if [ "${1:-}" = "--setup-only" ]; then SETUP_ONLY=1; shift; fi
CHECK_ARGS=("$@")
[ ${#CHECK_ARGS[@]} -gt 0 ] || CHECK_ARGS=(-g generic/quick)

WORK=${FSTESTS_WORK:-/var/tmp/uf2fs-fstests}
SIZE=${FSTESTS_IMAGE_SIZE:-4G}
MOPTS=${FSTESTS_MOUNT_OPTS:-allow_other,default_permissions}
EXCLUDE=$(realpath "${FSTESTS_EXCLUDE:-$ROOT/scripts/fstests-exclude.txt}")
F2FS_CHECK=$(realpath "${F2FS_CHECK:-$ROOT/tools/f2fs-verdict}")
HELPER=/sbin/mount.fuse.uf2fs

say() { echo "fstests: $*" >&2; }
die() { echo "fstests: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (fstests mounts, unmounts and adds test users)"
if [ -z "${FSTESTS_SRC:-}" ] || [ ! -x "$FSTESTS_SRC/check" ] || [ ! -f "$FSTESTS_SRC/common/rc" ]; then
  die "set FSTESTS_SRC to an fstests checkout, e.g.
    git clone https://git.kernel.org/pub/scm/fs/xfs/xfstests-dev.git /var/tmp/xfstests-dev
    FSTESTS_SRC=/var/tmp/xfstests-dev bash scripts/fstests.sh"
fi
FSTESTS_SRC=$(realpath "$FSTESTS_SRC")
[ -x "$F2FS_CHECK" ] || die "checker $F2FS_CHECK not found"
[ -f "$EXCLUDE" ] || die "exclusion list $EXCLUDE not found"

# --- 1. Dependencies -------------------------------------------------------------------------
# Build (the minimal set for `make`): autoconf automake libtool libtool-bin make gcc uuid-dev
# xfslibs-dev libacl1-dev. Optional for the build (without them some src/ programs are not
# built and their tests do not run): libaio-dev liburing-dev libcap-dev libgdbm-dev
# libgdbm-compat-dev (ndbm.h, for generic/010's dbtest).
# Run: xfsprogs (xfs_io is mandatory), bc, perl, gawk, attr, acl, psmisc, fio, dbench,
# uuid-runtime, libcap2-bin, xz-utils, e2fsprogs (chattr/lsattr), fuse3, f2fs-tools (fsck.f2fs
# for f2fs-verdict), python3, util-linux (flock, findmnt).
PKGS=(autoconf automake libtool libtool-bin make gcc uuid-dev xfslibs-dev libacl1-dev
      libaio-dev liburing-dev libcap-dev libgdbm-dev libgdbm-compat-dev
      xfsprogs bc perl gawk attr acl psmisc fio dbench uuid-runtime libcap2-bin xz-utils
      e2fsprogs fuse3 f2fs-tools python3 util-linux)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- 2. uf2fs ----------------------------------------------------------------------------------
if [ -z "${UF2FS:-}" ]; then
  cargo build --release --quiet -p uf2fs
  UF2FS=$ROOT/target/release/uf2fs
fi
UF2FS=$(realpath "$UF2FS")
"$UF2FS" mount --help >/dev/null 2>&1 || die "$UF2FS has no 'mount' command yet"

# --- 3. fstests: a private copy, built and patched --------------------------------------------
mkdir -p "$WORK"/{images,mnt/test,mnt/scratch,bin,logs}
FST=$WORK/fstests
stamp=$(cd "$FSTESTS_SRC" && { git rev-parse HEAD 2>/dev/null || echo nogit; } &&
          { git status --porcelain 2>/dev/null || true; } | md5sum)
if [ ! -f "$FST/.uf2fs-stamp" ] || [ "$(cat "$FST/.uf2fs-stamp")" != "$stamp" ]; then
  say "copying $FSTESTS_SRC to $FST"
  rm -rf "$FST" && mkdir -p "$FST"
  (cd "$FSTESTS_SRC" && tar -c --exclude=./results --exclude=./local.config .) | tar -x -C "$FST"
  say "building fstests (make)"
  (cd "$FST" && make -j"$(nproc)" >"$WORK/logs/build.log" 2>&1) ||
    { tail -20 "$WORK/logs/build.log" >&2; die "fstests build failed (log: $WORK/logs/build.log)"; }
  echo "$stamp" >"$FST/.uf2fs-stamp"
fi
cp "$FSTESTS_SRC/common/rc" "$FST/common/rc"   # patch a pristine copy on every run

# With FSTYP=fuse, fstests checks nothing after a test (_check_test_fs and _check_dev_fs say
# "no way to check consistency for fuse") and cannot repair the test file system. This patch:
#  - makes both call _check_fuse_filesystem DEVICE, which unmounts the file system, runs
#    $FUSE_CHECK_PROG DEVICE, fails the test (and logs the checker's output to the test's
#    .full file) if it exits non-zero, and mounts the file system again when it was clean;
#  - adds a fuse case to _repair_test_fs that runs $FUSE_REPAIR_PROG TEST_DEV (here: a fresh
#    uf2fs mkfs, so that one broken test does not break every later one);
#  - makes _scratch_mkfs run $FUSE_MKFS_PROG SCRATCH_DEV (here: uf2fs mkfs) instead of
#    emptying the mounted scratch file system with rm -rf (upstream's fuse behaviour);
#  - makes _fs_type report "fuse" for "fuse.SUBTYPE" mounts, so that a uf2fs that sets its
#    FUSE subtype passes init_rc's "is TEST_DEV mounted as $FSTYP" check.
#  - adds a fuse case to _try_scratch_mkfs_sized that runs $FUSE_MKFS_PROG SCRATCH_DEV BYTES
#    (here: uf2fs mkfs --size), so that the tests that fill a small volume to ENOSPC
#    (generic/027, 269, 273 and the like) run instead of calling _notrun.
patch_common_rc() {
  python3 - "$FST/common/rc" <<'PY'
import re, sys
path = sys.argv[1]
s = open(path).read()
def sub(pattern, repl, text, count):
    new, n = re.subn(pattern, repl, text)
    if n != count:
        sys.exit(f"patch_common_rc: expected {count} match(es) of {pattern!r}, found {n}: "
                 "fstests changed, update scripts/fstests.sh")
    return new
# the two "no way to check" fuse cases: _check_test_fs first, then _check_dev_fs
parts = s.split("\t# no way to check consistency for fuse\n")
if len(parts) != 3:
    sys.exit("patch_common_rc: expected 2 'no way to check consistency for fuse' cases")
s = (parts[0] + "\t_check_fuse_filesystem $TEST_DEV\n" + parts[1]
     + "\t_check_fuse_filesystem $device\n" + parts[2])
s = sub(r"(_repair_test_fs\(\)\n\{\n\tcase \$FSTYP in\n)",
        r"\1\tfuse)\n\t\t_repair_fuse_test_fs >$tmp.repair 2>&1\n\t\tres=$?\n\t\t;;\n", s, 1)
s = sub(r"(\n\tnfs\*\|afs\|cifs\|ceph\|overlay\|glusterfs\|pvfs2\|9p\|fuse\|virtiofs\)\n)",
        "\n\tfuse)\n\t\t_scratch_mkfs_fuse\n\t\treturn $?\n\t\t;;\\1", s, 1)
s = sub(r"(\n\tf2fs\)\n\t\t# mkfs\.f2fs requires # of sectors)",
        "\n\tfuse)\n\t\t_scratch_unmount 2>/dev/null\n"
        "\t\t[ -n \"$FUSE_MKFS_PROG\" ] || _notrun \"no FUSE_MKFS_PROG for a sized mkfs\"\n"
        "\t\t\"$FUSE_MKFS_PROG\" \"$SCRATCH_DEV\" \"$fssize\"\n\t\t;;\\1", s, 1)
s = sub(r"(-e 's/fuse\.ceph-fuse/ceph-fuse/')",
        r"\1 -e 's/^fuse\\.[^ ]*$/fuse/'", s, 1)
s += r'''
# --- added by uf2fs's scripts/fstests.sh ---
# Post-test check for FSTYP=fuse: unmount, run $FUSE_CHECK_PROG DEVICE, mount again if clean.
_check_fuse_filesystem()
{
	local device=$1
	local ok=1
	[ -n "$FUSE_CHECK_PROG" ] || return 0
	local mountpoint=$(findmnt -rncv -S "$device" -o TARGET | head -1)

	if [ -n "$mountpoint" ] && ! _unmount "$mountpoint"; then
		_log_err "_check_fuse_filesystem: cannot unmount $device from $mountpoint"
		ok=0
	fi
	if [ $ok -eq 1 ]; then
		"$FUSE_CHECK_PROG" "$device" >$tmp.fsck 2>&1
		if [ $? -ne 0 ]; then
			_log_err "_check_fuse_filesystem: filesystem on $device is inconsistent"
			echo "*** $FUSE_CHECK_PROG output ***"	>>$seqres.full
			cat $tmp.fsck				>>$seqres.full
			echo "*** end $FUSE_CHECK_PROG output"	>>$seqres.full
			ok=0
		fi
		rm -f $tmp.fsck
	fi

	if [ $ok -eq 1 ] && [ -n "$mountpoint" ]; then
		if [ "$device" = "$TEST_DEV" ] && [ "$mountpoint" = "$TEST_DIR" ]; then
			_test_mount
		elif [ "$device" = "$SCRATCH_DEV" ] && [ "$mountpoint" = "$SCRATCH_MNT" ]; then
			_try_scratch_mount
		else
			_mount -t $FSTYP$FUSE_SUBTYP $MOUNT_OPTIONS $device $mountpoint
		fi
		if [ $? -ne 0 ]; then
			_dump_err "!!! failed to remount $device on $mountpoint"
			ok=0
		fi
	fi

	if [ $ok -eq 0 ]; then
		status=1
		if [ "$iam" != "check" ]; then
			_exit 1
		fi
		return 1
	fi
	return 0
}

# With FUSE_MKFS_PROG, _scratch_mkfs formats SCRATCH_DEV afresh instead of emptying it.
_scratch_mkfs_fuse()
{
	if [ -z "$FUSE_MKFS_PROG" ]; then
		_scratch_cleanup_files
		return $?
	fi
	_scratch_unmount 2>/dev/null
	"$FUSE_MKFS_PROG" "$SCRATCH_DEV"
}

_repair_fuse_test_fs()
{
	if [ -z "$FUSE_REPAIR_PROG" ]; then
		echo "no FUSE_REPAIR_PROG set: cannot repair $TEST_DEV"
		return 1
	fi
	"$FUSE_REPAIR_PROG" "$TEST_DEV"
}
'''
open(path, "w").write(s)
PY
}
patch_common_rc

# --- 4. helpers --------------------------------------------------------------------------------
# umount(8) of a FUSE file system returns as soon as the kernel has detached it, before the
# daemon has written its last checkpoint and exited. The daemon holds an exclusive flock on its
# image until then: the helper (before mounting), the checker and the repair wait on it (up to
# 120 s each).
# The mount helper is the package's (scripts/mount.fuse.uf2fs), naming this run's uf2fs. What
# was installed before (the package's helper, or nothing) is put back when this script ends,
# except with --setup-only, which leaves it for the ./check run that follows.
HELPER_BEFORE=$WORK/mount.fuse.uf2fs.before
if [ -e "$HELPER" ] && [ ! -e "$HELPER_BEFORE" ] && ! grep -q "installed by uf2fs's scripts/fstests.sh for its run" "$HELPER"; then
  cp -a "$HELPER" "$HELPER_BEFORE"
fi
restore_helper() {
  if [ -e "$HELPER_BEFORE" ]; then mv -f "$HELPER_BEFORE" "$HELPER"; else rm -f "$HELPER"; fi
}
[ $SETUP_ONLY = 1 ] || trap restore_helper EXIT
sed "s|^UF2FS=.*|UF2FS='$UF2FS'  # installed by uf2fs's scripts/fstests.sh for its run|" \
  "$ROOT/scripts/mount.fuse.uf2fs" >"$HELPER.new"
chmod 755 "$HELPER.new"
mv -f "$HELPER.new" "$HELPER"

cat >"$WORK/bin/check-image" <<EOF
#!/bin/sh
# FUSE_CHECK_PROG: \`check-image IMAGE\`, called unmounted after each test by the patched
# common/rc. Waits for the daemon that served IMAGE to exit, then runs the checker.
lock=\$1
out=\$(flock -w 120 -E 75 "\$lock" '$F2FS_CHECK' "\$1" 2>&1)
rc=\$?
[ \$rc = 75 ] && echo "check-image: the uf2fs daemon for \$1 did not exit within 120 s" >&2
printf '%s\\n' "\$out"
exit \$rc
EOF
cat >"$WORK/bin/reformat-image" <<EOF
#!/bin/sh
# FUSE_MKFS_PROG and FUSE_REPAIR_PROG: \`reformat-image IMAGE [BYTES]\`: a fresh file system,
# for _scratch_mkfs (BYTES: _scratch_mkfs_sized) and after a failed check of TEST_DEV. Quiet:
# tests may not redirect mkfs output. A sized mkfs leaves the image file that size, so an
# unsized one first gives the file its configured size back.
flock -w 120 "\$1" true || exit 75
if [ -n "\${2:-}" ]; then
  exec '$UF2FS' mkfs --force --size "\$((\$2 / 1024))K" "\$1" >/dev/null
fi
truncate -s '$SIZE' "\$1" || exit 1
exec '$UF2FS' mkfs --force "\$1" >/dev/null
EOF
chmod 755 "$WORK/bin/check-image" "$WORK/bin/reformat-image"

# fstests runs some tests as these users (they are skipped when the users are missing)
getent group fsgqa >/dev/null || groupadd fsgqa
getent passwd fsgqa >/dev/null || useradd -m -g fsgqa fsgqa
getent passwd fsgqa2 >/dev/null || useradd -m -g fsgqa fsgqa2
getent passwd 123456-fsgqa >/dev/null || useradd -m -g fsgqa 123456-fsgqa

# --- 5. images and local.config ---------------------------------------------------------------
TEST_DEV=$WORK/images/test.img
SCRATCH_DEV=$WORK/images/scratch.img
TEST_DIR=$(realpath "$WORK/mnt/test")
SCRATCH_MNT=$(realpath "$WORK/mnt/scratch")
for d in "$TEST_DIR" "$SCRATCH_MNT"; do          # leftovers of an interrupted run
  while mountpoint -q "$d"; do umount "$d" || fusermount3 -u "$d" || die "cannot unmount $d"; done
done
# Entries marked "unless CAP_SYS_RESOURCE:" apply only where root cannot raise a hard limit.
EFFECTIVE_EXCLUDE=$WORK/exclude.txt
if bash -c 'ulimit -f 1000 && ulimit -f unlimited' 2>/dev/null; then
  grep -v '# unless CAP_SYS_RESOURCE:' "$EXCLUDE" >"$EFFECTIVE_EXCLUDE"
else
  cp "$EXCLUDE" "$EFFECTIVE_EXCLUDE"
fi
for img in "$TEST_DEV" "$SCRATCH_DEV"; do
  # wait for a daemon of an earlier run to finish with the image
  [ ! -e "$img" ] || flock -w 120 "$img" true || die "$img is still in use"
  rm -f "$img"
  "$UF2FS" mkfs "$img" --size "$SIZE" >/dev/null
done

cat >"$FST/local.config" <<EOF
# written by uf2fs's scripts/fstests.sh
export FSTYP=fuse
export FUSE_SUBTYP=.uf2fs
export TEST_DEV=$TEST_DEV
export TEST_DIR=$TEST_DIR
export SCRATCH_DEV=$SCRATCH_DEV
export SCRATCH_MNT=$SCRATCH_MNT
export TEST_FS_MOUNT_OPTS="-o $MOPTS"
export MOUNT_OPTIONS="-o $MOPTS"
export FUSE_CHECK_PROG=$WORK/bin/check-image
export FUSE_REPAIR_PROG=$WORK/bin/reformat-image
export FUSE_MKFS_PROG=$WORK/bin/reformat-image
EOF

if [ $SETUP_ONLY = 1 ]; then
  say "set up in $FST; run: cd $FST && ./check -E $EFFECTIVE_EXCLUDE ${CHECK_ARGS[*]}"
  exit 0
fi

# --- 6. run --------------------------------------------------------------------------------------
say "running ./check -E $EFFECTIVE_EXCLUDE ${CHECK_ARGS[*]} (output: $WORK/logs/check.log)"
start=$(date +%s)
set +e
(cd "$FST" && ./check -E "$EFFECTIVE_EXCLUDE" "${CHECK_ARGS[@]}") 2>&1 | tee "$WORK/logs/check.log"
check_rc=${PIPESTATUS[0]}
set -e
secs=$(( $(date +%s) - start ))
for d in "$TEST_DIR" "$SCRATCH_MNT"; do
  while mountpoint -q "$d"; do umount "$d" || break; done
done
final=()
for img in "$TEST_DEV" "$SCRATCH_DEV"; do
  if "$WORK/bin/check-image" "$img" >"$WORK/logs/final-$(basename "$img").txt" 2>&1; then
    final+=("$(basename "$img"): clean")
  else
    final+=("$(basename "$img"): NOT CLEAN (see $WORK/logs/final-$(basename "$img").txt)")
  fi
done

# --- 7. summary ----------------------------------------------------------------------------------
log=$WORK/logs/check.log
words() { { grep "^$1" "$log" | tail -1 | sed "s/^$1//"; } || true; }
ran=$(words "Ran:" | wc -w)
notrun=$(words "Not run:" | wc -w)
failed=$(words "Failures:" | wc -w)
excluded=$(grep -c '\[expunged\]' "$log" || true)
run=$((ran - notrun))
passed=$((run - failed))
{
  echo "uf2fs fstests run, $(date '+%F %T'), ${secs}s, check exit $check_rc"
  echo "fstests: $(cd "$FSTESTS_SRC" && git describe --always --dirty 2>/dev/null || echo "$FSTESTS_SRC")"
  echo "uf2fs: $("$UF2FS" --version 2>/dev/null || echo "$UF2FS")"
  echo "selection: ${CHECK_ARGS[*]}; exclusion list: $EXCLUDE"
  echo "passed $passed of $run run; $notrun not run (their own _notrun); $failed failed; $excluded excluded"
  echo "failures: $(words "Failures:")"
  echo "final checks: ${final[*]}"
  echo "logs: $log; the daemons': journald or syslog (tag uf2fs), else /run/uf2fs/*.log; per-test output: $FST/results/"
} | tee "$WORK/summary.txt"
[ "$failed" = 0 ] && [ "$ran" -gt 0 ]
