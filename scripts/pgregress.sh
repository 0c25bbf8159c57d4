#!/usr/bin/env bash
# Prepares PostgreSQL 15's own regression suite for e2e/pgregress, once:
# the suite's source (apt-get source postgresql-15: the installed version's,
# else the newest 15.x the archive serves), regress.so and the contrib/spi
# modules its tests load (autoinc.so, refint.so) built with PGXS, and
# pg_regress from postgresql-server-dev-15. Idempotent: a prepared cache is
# reused without touching apt or the network.
#
#   scripts/pgregress.sh          prepare (or reuse) and print the paths
#
# On a fresh Debian 12 as root it installs what is missing (dpkg-dev for
# apt-get source, make, gcc, postgresql-server-dev-15) and adds a deb-src
# stanza mirroring the machine's Debian deb stanzas (deb822 or
# sources.list) when there is none.
#
# Environment:
#   WALSHADOW_PGREGRESS_DIR  the cache (default: <repo>/var/pgregress)
#   WALSHADOW_PG_BINDIR      PostgreSQL 15's bin dir (default /usr/lib/postgresql/15/bin)
#
# Progress goes to stderr; stdout ends with KEY=VALUE lines, which
# e2e/pgregress reads:
#   PGREGRESS_PG_REGRESS   the pg_regress binary
#   PGREGRESS_INPUTDIR     src/test/regress of the source tree (sql/, expected/, data/)
#   PGREGRESS_SCHEDULE     its parallel_schedule
#   PGREGRESS_DLPATH       the directory of regress.so, autoinc.so, refint.so
#   PGREGRESS_VERSION      the Debian version of the source
#   PGREGRESS_INSTALLED    the installed postgresql-15's version
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
dir=${WALSHADOW_PGREGRESS_DIR:-$repo/var/pgregress}
bindir=${WALSHADOW_PG_BINDIR:-/usr/lib/postgresql/15/bin}
pg_config=$bindir/pg_config
pkg=postgresql-15
srcstanza_deb822=/etc/apt/sources.list.d/walshadow-deb-src.sources
srcstanza_list=/etc/apt/sources.list.d/walshadow-deb-src.list
stamp=$dir/ready

say() { echo "pgregress: $*" >&2; }
die() { echo "pgregress: $*" >&2; exit 1; }

sudo=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null && sudo=sudo
fi
as_root() {
  if [ "$(id -u)" = 0 ] || [ -n "$sudo" ]; then $sudo "$@"; else die "need root (or sudo) for: $*"; fi
}

installed=$(dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null || true)
[ -n "$installed" ] || die "$pkg is not installed (scripts/deps.sh installs it)"

# print emits the paths of a prepared cache (read back from its stamp).
print() {
  cat "$stamp"
}

# ready reports whether the cache was prepared for the installed version
# and everything it names is still there.
ready() {
  [ -f "$stamp" ] || return 1
  grep -qx "PGREGRESS_INSTALLED=$installed" "$stamp" || return 1
  local key val
  while IFS='=' read -r key val; do
    case $key in
    PGREGRESS_PG_REGRESS) [ -x "$val" ] || return 1 ;;
    PGREGRESS_INPUTDIR) [ -d "$val/sql" ] && [ -d "$val/expected" ] || return 1 ;;
    PGREGRESS_SCHEDULE) [ -f "$val" ] || return 1 ;;
    PGREGRESS_DLPATH) for m in regress autoinc refint; do [ -f "$val/$m.so" ] || return 1; done ;;
    esac
  done <"$stamp"
}

if ready; then
  say "reusing $dir (source $(sed -n 's/^PGREGRESS_VERSION=//p' "$stamp"))"
  print
  exit 0
fi

start=$(date +%s)

# 1. The packages: dpkg-dev (dpkg-source, for apt-get source), the
#    compiler, the server headers with PGXS and pg_regress.
want=(dpkg-dev make gcc postgresql-server-dev-15)
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
updated=""
apt_update() {
  say "apt-get update"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
  updated=1
}
if [ ${#missing[@]} -gt 0 ]; then
  apt_update
  say "installing ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
# --pgxs is <pgxs>/src/makefiles/pgxs.mk; pg_regress is <pgxs>/src/test/regress/.
pg_regress=$(readlink -f "$(dirname "$("$pg_config" --pgxs)")/../test/regress/pg_regress" || true)
[ -x "$pg_regress" ] || die "pg_regress not found at $pg_regress (postgresql-server-dev-15 ships it)"

# 2. A deb-src stanza: the machine's own Debian deb stanzas with their type
#    changed, in a file of our own (deb822 when the machine uses deb822).
has_deb_src() {
  grep -hqsE '^[[:space:]]*deb-src[[:space:]]' /etc/apt/sources.list /etc/apt/sources.list.d/*.list && return 0
  grep -hqsiE '^Types:.*\bdeb-src\b' /etc/apt/sources.list.d/*.sources && return 0
  return 1
}
if ! has_deb_src; then
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    say "adding deb-src stanzas in $srcstanza_deb822 (from debian.sources)"
    sed -E 's/^Types:.*/Types: deb-src/I' /etc/apt/sources.list.d/debian.sources | as_root tee "$srcstanza_deb822" >/dev/null
  elif grep -qsE '^[[:space:]]*deb[[:space:]].*debian' /etc/apt/sources.list; then
    say "adding deb-src lines in $srcstanza_list (from sources.list)"
    grep -E '^[[:space:]]*deb[[:space:]].*debian' /etc/apt/sources.list | sed -E 's/^([[:space:]]*)deb([[:space:]])/\1deb-src\2/' |
      as_root tee "$srcstanza_list" >/dev/null
  else
    die "no Debian deb stanza in /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list to derive a deb-src one from"
  fi
  apt_update
fi

# 3. The source versions to try: the installed one when the archive lists
#    it, then every other 15.x it lists, newest first (a listed version can
#    still be missing from the pool: the security archive lists sources it
#    does not always serve).
served_versions() { apt-cache showsrc "$pkg" 2>/dev/null | sed -n 's/^Version: //p' | sort -u; }
served=$(served_versions)
if [ -z "$served" ] && [ -z "$updated" ]; then
  apt_update
  served=$(served_versions)
fi
[ -n "$served" ] || die "apt serves no source of $pkg (deb-src configured: $(has_deb_src && echo yes || echo no))"
candidates=()
grep -qxF "$installed" <<<"$served" && candidates+=("$installed")
others=()
for v in $served; do
  case $v in 15.*) [ "$v" = "$installed" ] || others+=("$v") ;; esac
done
# Newest first (dpkg's order, an insertion sort: there are a handful).
for ((i = 1; i < ${#others[@]}; i++)); do
  for ((j = i; j > 0; j--)); do
    dpkg --compare-versions "${others[j]}" gt "${others[j - 1]}" || break
    tmp=${others[j]}; others[j]=${others[j - 1]}; others[j - 1]=$tmp
  done
done
candidates+=("${others[@]}")
[ ${#candidates[@]} -gt 0 ] || die "apt lists no 15.x source of $pkg (listed: $(echo $served))"

# 4. apt-get source into a scratch directory, the tree moved into place
#    whole; the first candidate that downloads wins.
mkdir -p "$dir"
upstream_of() { local u=${1#*:}; echo "${u%-*}"; }
version=""
for v in "${candidates[@]}"; do
  tree=$dir/$pkg-$(upstream_of "$v")
  if [ -f "$tree/src/test/regress/parallel_schedule" ] && [ -f "$tree/.walshadow-version" ] &&
    [ "$(cat "$tree/.walshadow-version")" = "$v" ]; then
    version=$v
    break
  fi
  scratch=$(mktemp -d "$dir/.download.XXXXXX")
  trap 'rm -rf "$scratch"' EXIT
  say "apt-get source $pkg=$v"
  # As root into a directory _apt cannot write, apt-get warns and
  # downloads as root.
  if ! (cd "$scratch" && apt-get source -qq "$pkg=$v" >&2); then
    say "apt-get source $pkg=$v failed; trying the next served version"
    rm -rf "$scratch"
    continue
  fi
  extracted=$(find "$scratch" -mindepth 1 -maxdepth 1 -type d -name "$pkg-*" | head -n1)
  [ -n "$extracted" ] && [ -f "$extracted/src/test/regress/parallel_schedule" ] ||
    die "apt-get source $pkg=$v left no src/test/regress/parallel_schedule in $scratch"
  echo "$v" >"$extracted/.walshadow-version"
  rm -rf "$tree"
  mv "$extracted" "$tree"
  rm -rf "$scratch"
  trap - EXIT
  version=$v
  break
done
[ -n "$version" ] || die "no source of $pkg could be downloaded (tried: ${candidates[*]})"
[ "$version" = "$installed" ] || say "the installed $installed's source is not served; using $version"
upstream=$(upstream_of "$version")
regress=$tree/src/test/regress

# 5. regress.so and contrib/spi's autoinc.so and refint.so (the triggers
#    test loads them from the same --dlpath) with PGXS, out of tree.
lib=$dir/lib-$upstream
rm -rf "$lib"
mkdir -p "$lib"
cp "$regress/regress.c" "$tree/contrib/spi/autoinc.c" "$tree/contrib/spi/refint.c" "$lib/"
cat >"$lib/Makefile" <<'EOF'
# Written by scripts/pgregress.sh: the regression suite's C modules, PGXS.
MODULES = regress autoinc refint
PG_CONFIG ?= pg_config
# JIT bitcode is not needed to run the suite and would need clang.
override with_llvm = no
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)
EOF
say "building regress.so, autoinc.so, refint.so with PGXS"
make -s -C "$lib" PG_CONFIG="$pg_config" >&2
for m in regress autoinc refint; do [ -f "$lib/$m.so" ] || die "the build made no $lib/$m.so"; done

# The server (the postgres OS user) reads data/ and loads the modules.
chmod -R a+rX "$dir"
chmod a+rx "$(dirname "$dir")" 2>/dev/null || true

cat >"$stamp.tmp" <<EOF
PGREGRESS_PG_REGRESS=$pg_regress
PGREGRESS_INPUTDIR=$regress
PGREGRESS_SCHEDULE=$regress/parallel_schedule
PGREGRESS_DLPATH=$lib
PGREGRESS_VERSION=$version
PGREGRESS_INSTALLED=$installed
EOF
mv "$stamp.tmp" "$stamp"
say "prepared in $(($(date +%s) - start)) s"
print
