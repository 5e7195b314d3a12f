#!/usr/bin/env bash
# Makes sure a Docker engine answers: installs Debian's docker.io when dockerd is
# missing, and starts dockerd when none is running. Where the capability bounding
# set lacks CAP_SYS_RESOURCE (sandboxed VMs), privileged containers such as kind
# nodes fail in runc; the engine we start then uses hack/runc-wrapper as runtime.
# Usage: hack/ensure-docker.sh <runc-wrapper binary>
set -euo pipefail
wrapper_src=$1
log=/var/log/eventbuilder-dockerd.log
wrapper=/usr/local/libexec/eventbuilder/runc-wrapper

if docker info >/dev/null 2>&1; then
  exit 0
fi

if ! command -v dockerd >/dev/null; then
  echo ">> installing docker.io (dockerd not found)"
  if [ "$(id -u)" != 0 ]; then echo "error: installing Docker needs root; install docker.io yourself or run as root" >&2; exit 1; fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null
fi

# Bit 24 of CapBnd is CAP_SYS_RESOURCE.
if (( (0x$(awk '/^CapBnd/ {print $2}' /proc/self/status) >> 24 & 1) == 0 )); then
  install -D -m 0755 "$wrapper_src" "$wrapper"
  if [ ! -f /etc/docker/daemon.json ]; then
    mkdir -p /etc/docker
    cat > /etc/docker/daemon.json <<JSON
{
  "runtimes": {"eventbuilder-runc": {"path": "$wrapper"}},
  "default-runtime": "eventbuilder-runc"
}
JSON
  elif ! grep -q eventbuilder-runc /etc/docker/daemon.json; then
    echo "error: this machine lacks CAP_SYS_RESOURCE, so privileged containers need a runtime wrapper," >&2
    echo "       but /etc/docker/daemon.json exists and does not name it. Add to it:" >&2
    echo "       \"runtimes\": {\"eventbuilder-runc\": {\"path\": \"$wrapper\"}}, \"default-runtime\": \"eventbuilder-runc\"" >&2
    exit 1
  fi
fi

echo ">> starting dockerd (log: $log)"
nohup dockerd >"$log" 2>&1 &
for _ in $(seq 1 60); do
  if docker info >/dev/null 2>&1; then exit 0; fi
  sleep 1
done
echo "error: dockerd did not answer within 60 s; last lines of $log:" >&2
tail -20 "$log" >&2
exit 1
