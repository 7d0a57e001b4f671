# What the scripts of scripts/, bench/ and Tests/ share; it only defines functions. Source it:
#   . "$root/scripts/lib.sh"

# apt_install PACKAGE...: installs Debian packages, without the recommended ones and without
# questions (through sudo when not root). When that fails (package lists stale or never fetched),
# runs `apt-get update`, once per script, and tries again. Quiet: apt-get's output is shown, on
# standard error, only when the install fails. Returns apt-get's status.
rq_apt_updated=0
apt_install() {
  local log status=0 apt=()
  [ "$(id -u)" = 0 ] || apt=(sudo)
  # scripts/test runs suites side by side: one apt-get of ours at a time (flock), and apt-get waits
  # for dpkg's lock held by anything else rather than failing at once.
  apt+=(env DEBIAN_FRONTEND=noninteractive flock /tmp/requestqueue-apt.lock apt-get -o DPkg::Lock::Timeout=600)
  log=$(mktemp) || return 1
  "${apt[@]}" install -y --no-install-recommends "$@" >"$log" 2>&1 || status=$?
  if [ "$status" != 0 ] && [ "$rq_apt_updated" = 0 ]; then
    rq_apt_updated=1
    status=0
    { "${apt[@]}" update && "${apt[@]}" install -y --no-install-recommends "$@"; } >>"$log" 2>&1 || status=$?
  fi
  if [ "$status" != 0 ]; then
    echo "apt-get install $* failed:" >&2
    cat "$log" >&2
  fi
  rm -f "$log"
  return "$status"
}

# use_swift_toolchain: makes sure the Swift toolchain is found: when swiftc is not on PATH, puts
# /opt/swift/usr/bin (where the toolchain is installed) in front. Returns 1, with a message, when
# there is no toolchain.
use_swift_toolchain() {
  command -v swiftc >/dev/null && return 0
  if [ -x /opt/swift/usr/bin/swiftc ]; then
    export PATH=/opt/swift/usr/bin:$PATH
    return 0
  fi
  echo "$(basename "$0"): no Swift toolchain: swiftc is not on PATH nor in /opt/swift/usr/bin" >&2
  return 1
}
