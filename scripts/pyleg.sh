#!/usr/bin/env bash
# The legs of other Python versions: builds strata for CPython 3.13, 3.14 or 3.15 in a
# Debian root (trixie for 3.13, forky for 3.14 and 3.15) and runs the whole test suite
# there (or, with `bench`, the benchmark).
#
#   scripts/pyleg.sh VERSION [test [ARGS]]  build, then python -m pytest -q tests ARGS
#   scripts/pyleg.sh VERSION bench ARGS     bench/run.py ARGS inside the root (that
#                                           version's tables; --update-docs brings its
#                                           sections back)
#   scripts/pyleg.sh VERSION shell          an interactive shell in the root, for debugging
#
# STRATA_LEG_DEBS: more Debian packages for the root (tests that use graphviz...).
#
# A root is made once per Debian suite with debootstrap --variant=minbase (the suite's
# Pythons and their headers, venv, gcc, cmake, PCRE2) at /var/tmp/strata-SUITE
# (STRATA_LEG_ROOT overrides it; outside the repository: CI works in fresh clones) and
# reused by every later run on the machine, with a virtual environment (pytest from
# PyPI) and a CMake build per version in it, so a second run rebuilds only what
# changed. Each run copies the working tree (tracked and untracked files that git does
# not ignore) into the root and runs there in a private mount namespace (/proc and
# /dev mounted for the run only); runs in one root take turns (a lock).
#
# When the leg cannot run here (not root, no debootstrap, no chroot/unshare, the root
# cannot be made: no network) it says why on one line and exits 0; once it runs, its
# exit status is the test suite's.
set -uo pipefail

export PATH="$PATH:/usr/sbin:/sbin"   # debootstrap, chroot
REPO=$(cd "$(dirname "$0")/.." && pwd)
VER=${1:-}
[ $# -gt 0 ] && shift
MODE=${1:-test}
[ $# -gt 0 ] && shift
BASE=python3,gcc,libc6-dev,cmake,make,pkg-config,libpcre2-dev,ca-certificates
case "$VER" in
3.13)
    SUITE=trixie
    # (this order: the marker of roots made before the other versions' legs existed)
    PACKAGES=python3.13-dev,python3.13-venv,gcc,libc6-dev,cmake,make,pkg-config,libpcre2-dev,ca-certificates
    VENV=/strata/venv BUILD=/strata/build ;;
3.14|3.15)
    SUITE=forky
    PACKAGES=python3.14-dev,python3.14-venv,python3.15-dev,python3.15-venv,$BASE
    VENV=/strata/venv-$VER BUILD=/strata/build-$VER ;;
*)
    echo "usage: scripts/pyleg.sh 3.13|3.14|3.15 [test [ARGS] | bench ARGS | shell]" >&2
    exit 2 ;;
esac
ROOT=${STRATA_LEG_ROOT:-/var/tmp/strata-$SUITE}
TAG=py${VER/./}          # py313: results' prefix, the messages' name
WORK=/strata             # inside the root: src/ (the copy), the venvs and builds

skip() {
    echo "$TAG leg: skipped: $*"
    exit 0
}

say() { echo "$TAG leg: $*"; }

# The Debian mirror apt already uses here (one-line or deb822 sources), else Debian's.
debian_mirror() {
    local f uri
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -r "$f" ] || continue
        uri=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^https?:\/\//) { print $i; break } }' "$f" |
              grep -E '/debian/?$' | head -n1)
        [ -n "$uri" ] && { echo "${uri%/}"; return; }
    done
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -r "$f" ] || continue
        uri=$(awk 'tolower($1) == "uris:" { for (i = 2; i <= NF; i++) print $i }' "$f" |
              grep -E '^https?://.*/debian/?$' | head -n1)
        [ -n "$uri" ] && { echo "${uri%/}"; return; }
    done
    echo "http://deb.debian.org/debian"
}

[ "$(id -u)" = 0 ] || skip "needs root (debootstrap and chroot); run it as root, or in CI"
command -v debootstrap >/dev/null 2>&1 || skip "debootstrap is not installed (make deps installs it)"
command -v chroot >/dev/null 2>&1 || skip "chroot is not available"
command -v unshare >/dev/null 2>&1 || skip "unshare is not available"
unshare --mount true 2>/dev/null || skip "cannot make a mount namespace here (unshare --mount failed)"

mkdir -p "$(dirname "$ROOT")"
exec 9>"$ROOT.lock"
flock 9   # one run at a time per root

# ------------------------------------------------------------------ the root, made once
# The marker names what the root was made with: a different list makes it anew.
if [ "$(cat "$ROOT/.strata-root-ready" 2>/dev/null)" != "$SUITE $PACKAGES" ]; then
    mirror=$(debian_mirror)
    say "making the Debian $SUITE root $ROOT from $mirror (once per machine; a few minutes)"
    rm -rf "$ROOT.new"
    t0=$(date +%s)
    # An older debootstrap (Debian 12's) has no script for a newer suite: testing
    # and sid are made alike.
    script=""
    [ -e "/usr/share/debootstrap/scripts/$SUITE" ] || script=/usr/share/debootstrap/scripts/sid
    if ! debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$ROOT.new" "$mirror" \
            $script >"$ROOT.debootstrap.log" 2>&1; then
        tail -n 5 "$ROOT.debootstrap.log" | sed 's/^/    /'
        rm -rf "$ROOT.new"
        skip "debootstrap could not make the $SUITE root (log: $ROOT.debootstrap.log)"
    fi
    rm -rf "$ROOT"
    mv "$ROOT.new" "$ROOT"
    echo "$SUITE $PACKAGES" >"$ROOT/.strata-root-ready"
    say "root ready in $(( $(date +%s) - t0 )) s"
fi

# Extra Debian packages some tests use (STRATA_LEG_DEBS, space-separated; the Makefile's
# PYLEG_DEBS), installed into the root once. A mirror whose Release file has expired
# (a snapshot of testing that is not refreshed) is still used.
missing=""
extra=${STRATA_LEG_DEBS:-}
[ "$MODE" = bench ] && extra="$extra libpython$VER-testsuite"   # the real workload
for p in $extra; do
    chroot "$ROOT" dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
        missing="$missing $p"
done
if [ -n "$missing" ]; then
    say "installing into the root:$missing"
    cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf" 2>/dev/null || true
    chroot "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
        sh -c "apt-get -o Acquire::Check-Valid-Until=false update -qq && apt-get install -y -qq --no-install-recommends $missing" \
        >"$ROOT.apt.log" 2>&1 || { tail -n 5 "$ROOT.apt.log"; say "cannot install$missing"; exit 1; }
fi

# --------------------------------------------------------------- the working tree, copied
mkdir -p "$ROOT$WORK"
rm -rf "$ROOT$WORK/src.new"
mkdir -p "$ROOT$WORK/src.new"
if git -C "$REPO" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    # tracked and untracked-but-not-ignored files that exist (not deleted ones)
    (cd "$REPO" && git ls-files -z -co --exclude-standard |
        while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
        tar --null -T - -cf -) | tar -C "$ROOT$WORK/src.new" -xf - ||
        { say "cannot copy the working tree into the root"; exit 1; }
else
    tar -C "$REPO" --exclude=./.git --exclude='./.venv*' --exclude=./build -cf - . |
        tar -C "$ROOT$WORK/src.new" -xf - || { say "cannot copy the tree"; exit 1; }
fi
rm -rf "$ROOT$WORK/src"
mv "$ROOT$WORK/src.new" "$ROOT$WORK/src"
# shared/ beside the checkout (seed documents, reference schemas some tests read)
rm -rf "$ROOT$WORK/shared"
if [ -d "$REPO/../shared" ]; then
    cp -aL "$REPO/../shared" "$ROOT$WORK/shared"
fi
# What this machine's pip needs to reach PyPI: DNS, locally added CA certificates
# (a proxy's), pip's configuration; pip's and the proxies' variables pass below.
cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf" 2>/dev/null || true
[ -r /etc/pip.conf ] && cp -L /etc/pip.conf "$ROOT/etc/pip.conf"
if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
    mkdir -p "$ROOT/usr/local/share/ca-certificates"
    cp -L /usr/local/share/ca-certificates/*.crt "$ROOT/usr/local/share/ca-certificates/"
fi

# ------------------------------------------------------------- run inside the root
# The script that runs in the root: venv (reused; requirements reinstalled when they
# change), the build (incremental: the build folder is kept), then the mode's command.
cat >"$ROOT$WORK/run-inside.sh" <<'INSIDE'
set -uo pipefail
ver=$1 venv=$2 build=$3 mode=$4
shift 4
tag=py${ver/./}
cd /strata/src
py=/usr/bin/python$ver
update-ca-certificates >/dev/null 2>&1 || true
if [ ! -x $venv/bin/python ]; then
    $py -m venv $venv || exit 1
fi
want=$(cat requirements-dev.txt | sha256sum | cut -c1-16)
if [ "$(cat $venv/.req 2>/dev/null)" != "$want" ]; then
    echo "$tag leg: installing requirements-dev.txt into the root's venv (PyPI)"
    $venv/bin/python -m pip install -q --disable-pip-version-check -r requirements-dev.txt || exit 1
    echo "$want" >$venv/.req
fi
echo "$tag leg: building strata with $($venv/bin/python -c 'import sys; print(sys.version.split()[0])')"
if ! $venv/bin/python -m pip install -q --disable-pip-version-check --no-build-isolation \
        --config-settings=build-dir=$build . >$build.log 2>&1; then
    tail -n 40 $build.log
    echo "$tag leg: the build failed"
    exit 1
fi
case "$mode" in
test)
    STRATA_TEST_VENV=$venv exec $venv/bin/python -m pytest -q -p no:cacheprovider tests "$@" ;;
bench)
    exec $venv/bin/python bench/run.py --python $venv/bin/python \
        --strata $venv/bin/strata "$@" ;;
shell)
    exec bash -i ;;
*)
    echo "$tag leg: unknown mode $mode (test, bench, shell)"; exit 2 ;;
esac
INSIDE

say "running '$MODE' in $ROOT"
# pip's settings and proxies pass into the root (not the rest of the environment).
PASS=()
while IFS='=' read -r name _; do
    case "$name" in
    PIP_FIND_LINKS) ;;   # a folder of this machine's, not in the root
    PIP_*|http_proxy|https_proxy|no_proxy|HTTP_PROXY|HTTPS_PROXY|NO_PROXY) PASS+=("$name=${!name}") ;;
    esac
done < <(env)
export PASS_DEF
PASS_DEF=$(declare -p PASS)
unshare --mount --propagation private bash -c '
    eval "$PASS_DEF"
    root=$1; shift
    mount -t proc proc "$root/proc" || exit 1
    mount --rbind /dev "$root/dev" || exit 1
    mkdir -p "$root/tmp" && chmod 1777 "$root/tmp"
    exec chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
        LANG=C.UTF-8 LC_ALL=C.UTF-8 TERM="${TERM:-dumb}" CI="${CI:-}" "${PASS[@]}" \
        bash /strata/run-inside.sh "$@"
' leg "$ROOT" "$VER" "$VENV" "$BUILD" "$MODE" "$@"
rc=$?
if [ "$MODE" = bench ] && [ -d "$ROOT$WORK/src/bench/results" ]; then
    mkdir -p "$REPO/bench/results"
    for f in "$ROOT$WORK"/src/bench/results/*; do
        cp "$f" "$REPO/bench/results/$TAG-$(basename "$f")"
    done
    say "results copied to bench/results/$TAG-*"
fi
if [ "$MODE" = bench ]; then
    # --update-docs rewrote this version's sections of the copy's docs/performance.md
    # (the overhead, sampling or line-timing one): bring those sections (only) back
    # into the working tree.
    case " $* " in *" --update-docs "*)
        python3 - "$ROOT$WORK/src/docs/performance.md" "$REPO/docs/performance.md" "$VER" <<'SPLICE'
import re
import sys
src, dst = (open(p).read() for p in sys.argv[1:3])
ver = sys.argv[3]
for m in re.finditer(r"<!-- (bench-[a-z-]+-" + re.escape(ver) + r"):begin[^>]*-->", src):
    end = f"<!-- {m.group(1)}:end -->"
    section = src[m.start():src.index(end, m.end()) + len(end)]
    begin = m.group(0)
    if begin in dst and end in dst:
        old = dst[dst.index(begin):dst.index(end) + len(end)]
        if old == section:
            continue
        dst = dst[:dst.index(begin)] + section + dst[dst.index(end) + len(end):]
    else:
        dst = dst.rstrip("\n") + "\n\n" + section + "\n"
    print(f"py{ver.replace('.', '')} leg: docs/performance.md: the CPython {ver} section {m.group(1)} updated")
open(sys.argv[2], "w").write(dst)
SPLICE
    esac
fi
exit $rc
