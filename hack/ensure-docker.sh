#!/usr/bin/env bash
# Makes sure a Docker engine answers: installs Debian's docker.io when dockerd is
# missing, and starts dockerd when none is running. Where the capability bounding
# set lacks CAP_SYS_RESOURCE (sandboxed VMs), privileged containers such as kind
# nodes fail in runc, so the engine must run them through hack/runc-wrapper.
# Usage: hack/ensure-docker.sh <runc-wrapper binary>
set -euo pipefail
wrapper_src=$1
log=/var/log/eventbuilder-dockerd.log
wrapper=/usr/local/libexec/eventbuilder/runc-wrapper

# Bit 24 of CapBnd is CAP_SYS_RESOURCE.
needs_wrapper=false
(( (0x$(awk '/^CapBnd/ {print $2}' /proc/self/status) >> 24 & 1) == 1 )) || needs_wrapper=true

# Configured before any engine starts, including one that installing docker.io starts.
if $needs_wrapper; then
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

if docker info >/dev/null 2>&1; then
  if $needs_wrapper && [ "$(docker info -f '{{.DefaultRuntime}}')" != eventbuilder-runc ]; then
    echo "error: the running Docker engine does not use $wrapper (see /etc/docker/daemon.json);" >&2
    echo "       restart it: kill \$(cat /var/run/docker.pid), then run make again (or: systemctl restart docker)" >&2
    exit 1
  fi
  exit 0
fi

if ! command -v dockerd >/dev/null; then
  echo ">> installing docker.io (dockerd not found)"
  if [ "$(id -u)" != 0 ]; then echo "error: installing Docker needs root; install docker.io yourself or run as root" >&2; exit 1; fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
  echo ">> starting dockerd (log: $log)"
  # Its own session, so a Ctrl-C in make does not stop the engine, and a plain
  # PATH, so the runtime wrapper finds the system's runc and not a project binary.
  setsid env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    nohup dockerd >"$log" 2>&1 </dev/null &
fi
for _ in $(seq 1 60); do
  if docker info >/dev/null 2>&1; then exit 0; fi
  sleep 1
done
echo "error: dockerd did not answer within 60 s; last lines of $log:" >&2
tail -20 "$log" >&2
exit 1
