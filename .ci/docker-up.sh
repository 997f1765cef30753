#!/usr/bin/env bash
# Start a private Docker engine for the docker sandbox backend and its tests, without touching the host network:
# no iptables rules, no ip_forward, no docker0 bridge (containers run with --network none anyway). The daemon gets
# its own data-root, exec-root, pidfile and socket under $WMRL_DOCKER_STATE (default /tmp/wmrl-docker), and the
# sandbox image (name from wmrl settings) is a busybox-static rootfs imported locally: no registry is needed.
# Afterwards:   source "$WMRL_DOCKER_STATE/env.sh"   (exports DOCKER_HOST)   ...   bash .ci/docker-down.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STATE="${WMRL_DOCKER_STATE:-/tmp/wmrl-docker}"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
IMAGE="${WMRL_DOCKER_IMAGE:-$(cd "$ROOT" && "$PYTHON" -c 'from wmrl.core.settings import get_settings; print(get_settings().docker_image)' 2>/dev/null || echo wmrl-sandbox:latest)}"

if ! command -v dockerd >/dev/null 2>&1 || [ ! -x /bin/busybox ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker.io busybox-static >/dev/null
fi

mkdir -p "$STATE"
SOCK="$STATE/docker.sock"
if [ -f "$STATE/wmrl-dockerd.pid" ] && kill -0 "$(cat "$STATE/wmrl-dockerd.pid")" 2>/dev/null; then
  echo "docker-up: dockerd already running (pid $(cat "$STATE/wmrl-dockerd.pid"))"
else
  nohup dockerd --iptables=false --ip6tables=false --ip-forward=false --bridge=none \
    --data-root "$STATE/data" --exec-root "$STATE/exec" --pidfile "$STATE/dockerd.pid" \
    -H "unix://$SOCK" >"$STATE/dockerd.log" 2>&1 &
  echo $! >"$STATE/wmrl-dockerd.pid"
fi
export DOCKER_HOST="unix://$SOCK"
for _ in $(seq 1 150); do docker version >/dev/null 2>&1 && break; sleep 0.2; done
if ! docker version >/dev/null 2>&1; then
  echo "docker-up: dockerd did not answer on $SOCK; last log lines:" >&2
  tail -n 20 "$STATE/dockerd.log" >&2
  exit 1
fi

if ! docker image inspect "$IMAGE" >/dev/null 2>&1; then
  rootfs="$(mktemp -d)"
  mkdir -p "$rootfs"/{bin,etc,tmp,data,workdir,sandbox,proc,dev,sys}
  cp /bin/busybox "$rootfs/bin/busybox"
  ln -s busybox "$rootfs/bin/sh"
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/tmp:/bin/sh\n' >"$rootfs/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$rootfs/etc/group"
  chmod 1777 "$rootfs/tmp"
  tar -C "$rootfs" -c . | docker import - "$IMAGE" >/dev/null
  rm -rf "$rootfs"
fi
echo "export DOCKER_HOST=unix://$SOCK" >"$STATE/env.sh"
echo "docker-up: dockerd pid $(cat "$STATE/wmrl-dockerd.pid"), image $IMAGE; run: source $STATE/env.sh"
