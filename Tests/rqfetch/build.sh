#!/usr/bin/env bash
# Builds what rqfetch needs and rqfetch itself; used by scripts/demo and scripts/test-rqfetch.
#   Tests/rqfetch/build.sh [apt packages the caller also needs...]
# Installs what a fresh Debian machine lacks (a C compiler, python3, libcurl4-openssl-dev, plus
# the packages given), builds librequestqueue with scripts/build-lib (release), then compiles
# examples-c/rqfetch/*.c with the plain command below. Build logs go to standard error; the last
# line of standard output is the path of the rqfetch program.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "$root/scripts/lib.sh"

say() { printf '%s\n' "$*" >&2; }

# The packages missing among "<command>:<package>" or "dpkg:<package>" pairs.
missing=()
for pair in cc:gcc cc:libc6-dev python3:python3 dpkg:libcurl4-openssl-dev "$@"; do
    what=${pair%%:*} pkg=${pair#*:}
    if [ "$what" = dpkg ]; then
        dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
    else
        command -v "$what" >/dev/null 2>&1 || missing+=("$pkg")
    fi
done
if [ ${#missing[@]} -gt 0 ]; then
    say "rqfetch: installing ${missing[*]} (apt-get)"
    apt_install "${missing[@]}"
fi

use_swift_toolchain

say "rqfetch: building librequestqueue (scripts/build-lib release)"
libdir=$("$root/scripts/build-lib" release | tail -n 1)
out="$root/.build-rqfetch"
mkdir -p "$out"
say "rqfetch: compiling examples-c/rqfetch"
cc -std=c11 -Wall -Wextra -Werror -O2 -I "$root/include" "$root"/examples-c/rqfetch/*.c \
    -L"$libdir" -lrequestqueue -Wl,-rpath,"$libdir" -o "$out/rqfetch.new"
mv "$out/rqfetch.new" "$out/rqfetch"
echo "$out/rqfetch"
