#!/usr/bin/env bash
# Stop the private Docker engine that .ci/docker-up.sh started (by its recorded PID) and remove its state.
set -uo pipefail
STATE="${WMRL_DOCKER_STATE:-/tmp/wmrl-docker}"
PIDFILE="$STATE/wmrl-dockerd.pid"
if [ -f "$PIDFILE" ]; then
  pid="$(cat "$PIDFILE")"
  if kill -0 "$pid" 2>/dev/null; then
    DOCKER_HOST="unix://$STATE/docker.sock" docker ps -aq 2>/dev/null | xargs -r env DOCKER_HOST="unix://$STATE/docker.sock" docker rm -f >/dev/null 2>&1
    kill "$pid"
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
  fi
  rm -f "$PIDFILE"
fi
# dockerd's managed containerd exits with it; unmount anything left under the state dir before removing it.
if [ -d "$STATE" ]; then
  grep -o " $STATE[^ ]*" /proc/mounts | sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
  rm -rf "$STATE"
fi
echo "docker-down: stopped"
