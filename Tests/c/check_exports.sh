#!/usr/bin/env bash
# Checks the exported interface of the built library against the header:
#   - `nm -D --defined-only` lists only rq_* symbols (nothing else is ignored);
#   - every function the header declares with RQ_API is exported, and every exported symbol is
#     declared in the header (the header is the whole public interface);
#   - the SONAME is librequestqueue.so.<MAJOR>, MAJOR being the header's RQ_VERSION_MAJOR;
#   - it needs neither libswift_Concurrency, _StringProcessing, _RegexParser nor libdispatch.
#
#   check_exports.sh LIBRARY HEADER [EXPECTED_MAJOR]
# EXPECTED_MAJOR (from CMake's SOVERSION) must equal the header's major when given.
set -euo pipefail

lib=${1:?usage: check_exports.sh LIBRARY HEADER [EXPECTED_MAJOR]}
header=${2:?usage: check_exports.sh LIBRARY HEADER [EXPECTED_MAJOR]}
status=0
fail() { echo "FAIL: $*" >&2; status=1; }

for tool in nm readelf perl; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool not found (apt-get install binutils perl)" >&2; exit 1; }
done
[ -f "$lib" ] || { echo "FAIL: no library at $lib" >&2; exit 1; }

# Symbol names, without version suffixes (name@VERSION / name@@VERSION).
exported=$(nm -D --defined-only "$lib" | awk 'NF >= 3 { sub(/@.*/, "", $3); print $3 }' | sort -u)
[ -n "$exported" ] || fail "nm -D --defined-only lists no symbol at all in $lib"
others=$(grep -v '^rq_' <<<"$exported" || true)
[ -z "$others" ] && echo "exports: only rq_* symbols ($(wc -l <<<"$exported") of them)" ||
  fail "symbols exported besides rq_*: $(tr '\n' ' ' <<<"$others")"

# Functions declared in the header: comments and preprocessor lines removed, then every
# `RQ_API <type> <name>(`.
declared=$(perl -0777 -ne '
  s{/\*.*?\*/}{ }gs; s{//[^\n]*}{}g; s{^\s*#[^\n]*(?:\\\n[^\n]*)*}{}gm;
  while (/\bRQ_API\b[^;{(]*?\b(rq_\w+)\s*\(/g) { print "$1\n" }' "$header" | sort -u)
[ -n "$declared" ] || fail "found no RQ_API function in $header"
missing=$(comm -23 <(echo "$declared") <(echo "$exported"))
extra=$(comm -13 <(echo "$declared") <(echo "$exported"))
[ -z "$missing" ] && echo "exports: all $(wc -l <<<"$declared") RQ_API functions of the header" ||
  fail "declared in the header but not exported: $(tr '\n' ' ' <<<"$missing")"
[ -z "$extra" ] || fail "exported but not declared in the header: $(tr '\n' ' ' <<<"$extra")"

# SONAME.
major=$(sed -n 's/^#define RQ_VERSION_MAJOR \([0-9][0-9]*\).*/\1/p' "$header")
[ -n "$major" ] || fail "no RQ_VERSION_MAJOR in $header"
if [ -n "${3:-}" ] && [ "$3" != "$major" ]; then
  fail "CMake's SOVERSION is $3 but the header's RQ_VERSION_MAJOR is $major"
fi
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "librequestqueue.so.$major" ] && echo "exports: SONAME $soname" ||
  fail "SONAME is '${soname:-none}', expected librequestqueue.so.$major"

# Swift runtime libraries the library does not use: no implicit import of concurrency or string
# processing (Package.swift, CMakeLists.txt). Loaded, they would cost every process about 1.6 MiB
# of resident memory.
unused=$(readelf -d "$lib" | grep -oE '\[(libswift_Concurrency|libswift_StringProcessing|libswift_RegexParser|libdispatch)\.so[^]]*\]' || true)
[ -z "$unused" ] && echo "exports: no Swift concurrency, string processing or dispatch library needed" ||
  fail "needs Swift runtime libraries it does not use: $(tr '\n' ' ' <<<"$unused")"

exit $status
