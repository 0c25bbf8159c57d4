#!/usr/bin/env bash
# The README's first command on a bare Debian 12, the first time: debootstrap
# a minimal bookworm into ./var/fresh (once), give it what a machine image of
# this kind has besides Debian (the Go toolchain, gcc (for cgo), make and git, the
# host's CA certificates and Go settings), clone this repository's HEAD into
# it, and run `go tool task demo` there in a chroot (/proc, /dev and /sys
# mounted). Passes when the demo ends with "every table matches"; prints how
# long the demo took. Needs root; shares the host's network, so the demo's
# ports (see scripts/demo.sh) must be free.
#
#   scripts/fresh-machine.sh          bootstrap (or reuse the bootstrapped base), run the demo afresh
#   scripts/fresh-machine.sh clean    remove ./var/fresh
#
# Every run starts from the bootstrapped base as debootstrap left it: the
# packages the demo installs, the clone and the Go caches of the previous
# run are thrown away (the base is kept as a tarball beside the tree).
# Uncommitted changes are not in the clone: commit first.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
fresh=${WALSHADOW_FRESH_DIR:-$root/var/fresh}
# (_root: go's ./... patterns skip a directory whose name starts with _,
# so the chroot, /proc mounted inside it, stays out of the module's packages.)
tree=$fresh/_root
base=$fresh/base.tar
mirror=${WALSHADOW_FRESH_MIRROR:-http://deb.debian.org/debian}

[ "$(id -u)" = 0 ] || { echo "fresh-machine.sh needs root (debootstrap, chroot, mounts)" >&2; exit 1; }

unmount() {
  for m in sys dev proc; do
    mountpoint -q "$tree/$m" && umount -R "$tree/$m" 2>/dev/null || umount -lR "$tree/$m" 2>/dev/null || true
  done
}
if [ "${1:-}" = clean ]; then
  [ -d "$tree" ] && unmount
  rm -rf "$fresh"
  exit 0
fi

if [ ! -f "$base" ]; then
  command -v debootstrap >/dev/null || {
    echo "== installing debootstrap on the host"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
  }
  echo "== debootstrap bookworm (minbase) into $tree"
  rm -rf "$tree"
  mkdir -p "$tree"
  debootstrap --variant=minbase bookworm "$tree" "$mirror" >"$fresh/debootstrap.log" 2>&1 ||
    { tail -20 "$fresh/debootstrap.log" >&2; exit 1; }
  tar -C "$tree" -cf "$base" .
fi

echo "== a bare machine from the bootstrapped base"
[ -d "$tree" ] && unmount
rm -rf "$tree"
mkdir -p "$tree"
tar -C "$tree" -xf "$base"
trap unmount EXIT
mount -t proc proc "$tree/proc"
mount --rbind /dev "$tree/dev" && mount --make-rslave "$tree/dev"
mount --rbind /sys "$tree/sys" && mount --make-rslave "$tree/sys"
cp /etc/resolv.conf "$tree/etc/resolv.conf"

# What a machine image of this kind has besides Debian's base system.
echo "== the image's extras: Go $(go env GOVERSION), gcc with libc6-dev, make, git, CA certificates, Go settings"
in_chroot() { chroot "$tree" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
  PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"; }
in_chroot bash -c 'DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gcc libc6-dev make git ca-certificates >/dev/null'
mkdir -p "$tree/usr/local/share/ca-certificates"
cp -a /usr/local/share/ca-certificates/. "$tree/usr/local/share/ca-certificates/"
cp -a /etc/ssl/certs/. "$tree/etc/ssl/certs/"
cp -a "$(go env GOROOT)" "$tree/usr/local/go"
goenv=$(go env GOENV)
if [ -f "$goenv" ]; then
  mkdir -p "$tree/root/.config/go"
  cp "$goenv" "$tree/root/.config/go/env"
fi

echo "== cloning $(git -C "$root" rev-parse --short HEAD) into the machine"
git clone -q "$root" "$tree/root/walshadow"

echo "== go tool task demo (first try), log in $fresh/demo.log"
start=$(date +%s)
rc=0
in_chroot bash -c 'cd /root/walshadow && go tool task demo' >"$fresh/demo.log" 2>&1 || rc=$?
took=$(($(date +%s) - start))
in_chroot bash -c 'cd /root/walshadow && go tool task demo:stop' >/dev/null 2>&1 || true
if [ $rc -ne 0 ] || ! grep -q "every table matches" "$fresh/demo.log"; then
  tail -40 "$fresh/demo.log" >&2
  echo "FAIL: the demo on a bare machine did not reach \"every table matches\" (exit $rc, ${took}s); log: $fresh/demo.log" >&2
  exit 1
fi
echo "PASS: the demo on a bare machine matched every table on the first try in ${took}s"
