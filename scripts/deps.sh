#!/usr/bin/env bash
# Installs the Debian packages walshadow's tests and demo need, when missing:
# PostgreSQL 15 (server, contrib, headers for pgext), ClickHouse, and curl
# (the demo talks to ClickHouse's HTTP interface). With the argument test it
# also installs ZooKeeper and a Java runtime, which only the tests' ClickHouse
# cluster (internal/testrig) runs: the demo does without them.
set -euo pipefail
want=(postgresql-15 postgresql-server-dev-15 clickhouse-server clickhouse-client curl)
case "${1:-}" in
  "") ;;
  test) want+=(zookeeper default-jre-headless) ;;
  *) echo "usage: $0 [test]" >&2; exit 2 ;;
esac
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing missing Debian packages: ${missing[*]}"
sudo=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Debian starts a default cluster and a ClickHouse service on install; the
# project runs its own servers on free ports, so stop the packaged ones.
$sudo pg_ctlcluster 15 main stop 2>/dev/null || true
$sudo service clickhouse-server stop 2>/dev/null || true
