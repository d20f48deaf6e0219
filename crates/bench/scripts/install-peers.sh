#!/usr/bin/env bash
# Installs the peer servers ponder-bench compares Ponder with: PostgreSQL and
# Redis, from Debian's packages. Idempotent; needs root (or sudo).
# Also installs `util-linux` (taskset, for the cores sweep) and `procps`.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
[ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need+=(fonts-dejavu-core)
command -v taskset >/dev/null 2>&1 || need+=(util-linux)
if [ "${#need[@]}" -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update
  $SUDO apt-get install -y --no-install-recommends "${need[@]}"
fi
# Debian's packages start system-wide services; ponder-bench starts its own
# servers on other ports with throw-away directories, so those may stay off.
for svc in redis-server postgresql; do
  if command -v service >/dev/null 2>&1; then $SUDO service "$svc" stop >/dev/null 2>&1 || true; fi
done
echo "postgres: $(ls -d /usr/lib/postgresql/*/bin | tail -1)"
echo "redis:    $(command -v redis-server)"
