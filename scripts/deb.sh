#!/usr/bin/env bash
# Builds the Debian packages (libredlock0, libredlock-dev, redlock-tools) from
# a clean copy of the committed tree (`git archive HEAD`: no build
# directories, no uncommitted changes) with `dpkg-buildpackage -us -uc -b`,
# puts the .deb, .changes and .buildinfo files in DEB_DIR (default "debs" in
# the source tree), and runs lintian on the .changes.
#
# JOBS (default 2) is the build's parallelism; STEP_TIMEOUT (default 1800)
# bounds the build, in seconds. The build needs no redis-server (the tests are
# not configured). scripts/deb-test.sh installs and checks what this built.
# The last line is "deb: PASS (...)" or "deb: FAIL (...)"; the exit status is
# non-zero when the build failed or lintian reported an error or a warning.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
JOBS=${JOBS:-2}
STEP_TIMEOUT=${STEP_TIMEOUT:-1800}
DEB_DIR=${DEB_DIR:-debs}
mkdir -p "$DEB_DIR" && DEB_DIR=$(cd "$DEB_DIR" && pwd)

fail() {
  echo "deb: FAIL ($1)"
  exit 1
}

for tool in git dpkg-buildpackage dpkg-checkbuilddeps dh lintian; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (scripts/setup.sh installs it)"
done
if ! missing=$(dpkg-checkbuilddeps debian/control 2>&1); then
  fail "build dependencies missing (scripts/setup.sh installs them): ${missing#*: }"
fi

# debian/changelog names the version the packages get; it must be meson's.
meson_version=$(sed -n "s/^ *version: *'\([^']*\)',*$/\1/p" meson.build | head -n 1)
deb_version=$(dpkg-parsechangelog -S Version)
if [[ ${deb_version%%[-+~]*} != "$meson_version" ]]; then
  fail "debian/changelog says $deb_version, meson.build $meson_version: add a changelog entry (dch -v $meson_version)"
fi

if [[ -n $(git status --porcelain --untracked-files=no) ]]; then
  echo "deb: note: uncommitted changes are not in the packages (they are built from HEAD)"
fi

tmp=$(mktemp -d /tmp/redlock-deb.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
src=$tmp/redlock-$meson_version
mkdir -p "$src"
git archive --format=tar HEAD | tar -x -C "$src" || fail "git archive HEAD failed"

echo "deb: building redlock $deb_version in $src (log: $DEB_DIR/build.log)"
if ! (cd "$src" && DEB_BUILD_OPTIONS="parallel=$JOBS ${DEB_BUILD_OPTIONS:-}" \
  timeout "$STEP_TIMEOUT" dpkg-buildpackage -us -uc -b) >"$DEB_DIR/build.log" 2>&1; then
  tail -n 40 "$DEB_DIR/build.log" | sed 's/^/    /'
  fail "dpkg-buildpackage failed, see $DEB_DIR/build.log"
fi

# Leave only this build's files in DEB_DIR.
rm -f "$DEB_DIR"/libredlock0_*.deb "$DEB_DIR"/libredlock-dev_*.deb "$DEB_DIR"/redlock-tools_*.deb \
  "$DEB_DIR"/libredlock0-dbgsym_*.deb "$DEB_DIR"/redlock-tools-dbgsym_*.deb \
  "$DEB_DIR"/redlock_*.changes "$DEB_DIR"/redlock_*.buildinfo
shopt -s nullglob
built=("$tmp"/*.deb "$tmp"/*.changes "$tmp"/*.buildinfo)
((${#built[@]} > 0)) || fail "dpkg-buildpackage made no packages"
mv "${built[@]}" "$DEB_DIR/"
changes=("$DEB_DIR"/redlock_"$deb_version"_*.changes)
((${#changes[@]} == 1)) || fail "expected one .changes file in $DEB_DIR"

echo "deb: packages in $DEB_DIR:"
for deb in "$DEB_DIR"/*.deb; do
  echo "  $(basename "$deb")"
done

# Errors and warnings fail; info tags are shown too (debian/rules says why
# the one that remains, no-symbols-control-file, is acceptable).
echo "deb: lintian $(basename "${changes[0]}")"
lintian_status=0
lintian --display-info --fail-on error,warning "${changes[0]}" >"$tmp/lintian.log" 2>&1 || lintian_status=$?
sed 's/^/    /' "$tmp/lintian.log"
if ((lintian_status != 0)); then
  fail "lintian reported $(grep -c '^[EW]: ' "$tmp/lintian.log") error or warning tags"
fi
echo "deb: PASS (packages in $DEB_DIR, lintian: $(grep -c '^[EWI]: ' "$tmp/lintian.log") tags, none an error or warning)"
