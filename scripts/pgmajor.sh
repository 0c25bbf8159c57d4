#!/usr/bin/env bash
# PostgreSQL 17 or 18 from Debian's packages on this Debian 12 machine.
# Both need a newer C library than bookworm's, so they are installed into a
# debootstrapped Debian (trixie for 17, sid for 18) under ./var/pg<major>/_root,
# and their programs and modules are copied out into ./var/pg<major>/usr with
# their ELF interpreter and library path pointed into that tree (patchelf):
# they run on this machine, as any user, outside the chroot, and find their
# share, lib and include directories beside them as PostgreSQL's relocatable
# layout does. Prints the bin dir to export as WALSHADOW_PG_BINDIR.
#
#   scripts/pgmajor.sh 17            bootstrap (once) and lay out var/pg17
#   scripts/pgmajor.sh 18 clean      remove var/pg18
#
# Needs root (debootstrap, chroot, apt-get).
set -euo pipefail
major=${1:?usage: pgmajor.sh 17|18 [clean]}
case $major in
17) suite=trixie ;;
18) suite=sid ;;
*) echo "pgmajor.sh: PostgreSQL $major is not one this script installs (17: trixie, 18: sid)" >&2; exit 2 ;;
esac
top=$(cd "$(dirname "$0")/.." && pwd)
dir=$top/var/pg$major
# (_root: go's ./... patterns skip directories whose name starts with _.)
root=$dir/_root
out=$dir/usr
mirror=${WALSHADOW_DEBIAN_MIRROR:-http://deb.debian.org/debian}

[ "$(id -u)" = 0 ] || { echo "pgmajor.sh needs root (debootstrap, chroot, apt-get)" >&2; exit 1; }
if [ "${2:-}" = clean ]; then
  rm -rf "$dir"
  exit 0
fi

export DEBIAN_FRONTEND=noninteractive
need=()
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v patchelf >/dev/null || need+=(patchelf)
if [ ${#need[@]} -gt 0 ]; then
  echo "== installing on the host: ${need[*]}"
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if [ ! -x "$root/usr/lib/postgresql/$major/bin/postgres" ]; then
  if [ ! -f "$root/etc/debian_version" ]; then
    echo "== debootstrap $suite (minbase) into $root"
    rm -rf "$root"
    mkdir -p "$root"
    debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$dir/debootstrap.log" 2>&1 ||
      { tail -20 "$dir/debootstrap.log" >&2; exit 1; }
  fi
  echo "== installing postgresql-$major and its server headers in $suite"
  # No cluster is made on install, and no service started: the chroot only
  # supplies files.
  mkdir -p "$root/etc/postgresql-common/createcluster.d"
  echo "create_main_cluster = false" >"$root/etc/postgresql-common/createcluster.d/walshadow.conf"
  printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
  chmod +x "$root/usr/sbin/policy-rc.d"
  # A mirror whose sid Release file is past its Valid-Until (a stale
  # mirror, or a machine clock ahead of it) still serves the packages.
  echo 'Acquire::Check-Valid-Until "false";' >"$root/etc/apt/apt.conf.d/99walshadow-valid-until"
  # postgresql-common's postinst runs systemd-tmpfiles, which needs /proc.
  mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
  trap 'umount "$root/proc" 2>/dev/null || true' EXIT
  chroot "$root" apt-get update -qq
  chroot "$root" apt-get install -y -qq --no-install-recommends "postgresql-$major" "postgresql-server-dev-$major" >"$dir/apt.log" 2>&1 ||
    { tail -20 "$dir/apt.log" >&2; exit 1; }
  umount "$root/proc"
fi

echo "== laying out $out (programs patched to run outside the chroot)"
rm -rf "$out"
mkdir -p "$out/lib/postgresql" "$out/share/postgresql" "$out/include"
cp -a "$root/usr/lib/postgresql/$major" "$out/lib/postgresql/$major"
ln -s "$root/usr/share/postgresql/$major" "$out/share/postgresql/$major"
ln -s "$root/usr/include/postgresql" "$out/include/postgresql"
interp=$root/lib64/ld-linux-x86-64.so.2
[ -e "$interp" ] || interp=$root/usr/lib64/ld-linux-x86-64.so.2
# DT_RPATH (not RUNPATH): it also serves the libraries they load, and the
# modules postgres dlopens.
rpath=$out/lib/postgresql/$major/lib:$root/usr/lib/x86_64-linux-gnu:$root/lib/x86_64-linux-gnu
patched=0
while IFS= read -r -d '' f; do
  head -c 4 "$f" | grep -q $'\x7fELF' || continue
  if patchelf --print-interpreter "$f" >/dev/null 2>&1; then
    patchelf --set-interpreter "$interp" "$f"
  fi
  patchelf --force-rpath --set-rpath "$rpath" "$f"
  patched=$((patched + 1))
done < <(find "$out/lib/postgresql/$major" -type f -print0)
# The whole tree must be readable by the servers' OS user.
# (Not a /proc mounted in the chroot, should one be left, and not through
# a symbolic link: those in the chroot name paths of this machine.)
find "$dir" -path "$root/proc" -prune -o ! -type l -exec chmod a+rX {} +
bin=$out/lib/postgresql/$major/bin
"$bin/postgres" --version
echo "patched $patched files; export WALSHADOW_PG_BINDIR=$bin"
