#!/usr/bin/env bash
# Run by scripts/test-release inside a private mount namespace where the Swift toolchain's folder is
# hidden: installs every release artifact as a user would and runs a request through each against
# the fixture server on 127.0.0.1.
#   without_toolchain.sh OUTDIR VERSION HOMEPAGE TOOLCHAIN_DIR WORKDIR
# WORKDIR/venv-sdist is a venv where the sdist was installed (with the toolchain) beforehand.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out=$1 version=$2 homepage=$3 toolchain=$4 tmp=$5
major=${version%%.*}

step() { printf '\n=== without the toolchain: %s\n' "$*"; }
fail() { echo "test-release: FAIL (without the toolchain): $*" >&2; exit 1; }
run_fixture() { python3 "$root/Tests/c/with_fixture.py" --server "$root/Tests/Fixtures/fixture_server.py" "$@"; }

# A user's environment: nothing of this checkout or the toolchain.
unset REQUESTQUEUE_LIBRARY REQUESTQUEUE_HEADER PYTHONPATH LD_LIBRARY_PATH PKG_CONFIG_PATH GEM_HOME \
      GEM_PATH RUBYLIB CMAKE_PREFIX_PATH
PATH=$(tr ':' '\n' <<<"$PATH" | grep -v "^$toolchain" | paste -sd: -)
[ -z "$(ls -A "$toolchain")" ] || fail "$toolchain is not hidden"
if command -v swift swiftc >/dev/null; then fail "a Swift toolchain is still on PATH: $(command -v swift swiftc)"; fi
echo "$toolchain is empty here; no swift on PATH"
cd "$tmp"

step "tarball: a C program built with pkg-config"
prefix=$tmp/x/librequestqueue-$version-linux-x86_64
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
[ "$(pkg-config --modversion requestqueue)" = "$version" ] || fail "pkg-config --modversion: $(pkg-config --modversion requestqueue)"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror -o "$tmp/c-tarball" "$root/Tests/cmake-consumer/consumer.c" \
  $(pkg-config --cflags --libs requestqueue)
unset PKG_CONFIG_PATH
LD_LIBRARY_PATH=$prefix/lib ldd "$tmp/c-tarball" | grep "$prefix/lib/librequestqueue.so.$major " >/dev/null ||
  fail "the program does not load the tarball's library"
LD_LIBRARY_PATH=$prefix/lib run_fixture --expect "^requestqueue $version$" --expect "^fetched 42 bytes$" -- \
  "$tmp/c-tarball" "{base}"

step ".deb: dpkg -i into a private root, against this system's package database"
admin=$tmp/dpkg-admin debroot=$tmp/debroot
mkdir -p "$admin/updates" "$admin/info" "$debroot"
cp /var/lib/dpkg/status "$admin/status"   # Depends are checked against what this system has
touch "$admin/available"
# Chrootless maintainer scripts: the package's postinst only runs ldconfig.
dpkg --admindir="$admin" --instdir="$debroot" --force-script-chrootless -i "$out/librequestqueue_${version}_amd64.deb" \
  > "$tmp/dpkg.log" 2>&1 || { grep -v 'files list file for package' "$tmp/dpkg.log"; fail "dpkg -i failed"; }
[ "$(dpkg-query --admindir="$admin" -W -f '${Status} ${Version}' librequestqueue)" = "install ok installed $version" ] ||
  fail "dpkg does not report librequestqueue $version installed"
[ -f "$debroot/usr/lib/librequestqueue.so.$version" ] || fail "the .deb did not install /usr/lib/librequestqueue.so.$version"
cp -r "$root/Tests/cmake-consumer" "$tmp/consumer-src"
cmake -S "$tmp/consumer-src" -B "$tmp/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$debroot/usr" > "$tmp/cmake.log" 2>&1 ||
  { cat "$tmp/cmake.log"; fail "find_package(RequestQueue) against the .deb's files failed"; }
grep "Found RequestQueue $version in $debroot/usr/lib/cmake/RequestQueue" "$tmp/cmake.log" ||
  fail "find_package did not find version $version in the .deb's files"
cmake --build "$tmp/consumer" > /dev/null
ldd "$tmp/consumer/consumer" | grep "$debroot/usr/lib/librequestqueue.so.$major " >/dev/null ||
  fail "the CMake consumer does not load the .deb's library"
run_fixture --expect "^requestqueue $version$" --expect "^fetched 42 bytes$" -- "$tmp/consumer/consumer" "{base}"

check_python() {  # venv
  local venv=$1
  run_fixture --expect "^versions $version $version $version$" --expect "^library $venv/" \
    --expect "^licence MIT$" --expect "^fetched 42 bytes$" -- "$venv/bin/python" "$root/Tests/release/check.py" "{base}" "$venv"
}

step "wheel: pip install into a fresh venv"
python3 -m venv "$tmp/venv-wheel"
wheel=$(ls "$out"/requestqueue-"$version"-py3-none-manylinux_*_x86_64.whl)
"$tmp/venv-wheel/bin/pip" install --quiet "$wheel"
check_python "$tmp/venv-wheel"

step "sdist: the install it built (with the toolchain, before) runs without it"
check_python "$tmp/venv-sdist"

step "gem: gem install into a fresh GEM_HOME"
GEM_HOME=$tmp/gems gem install --local --no-document "$out/requestqueue-$version-x86_64-linux.gem" >/dev/null
GEM_HOME=$tmp/gems run_fixture --expect "^versions $version $version $version$" --expect "^library $tmp/gems/" \
  --expect "^licence MIT $homepage$" --expect "^fetched 42 bytes$" -- ruby "$root/Tests/release/check.rb" "{base}"
