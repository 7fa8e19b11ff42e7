# A dockerd of the deployment lanes' own (sourced by tests/deploy/run.sh): its own socket, data
# root, exec root and pidfile, no iptables, no bridge — never the system's dockerd or its data.
# dockerd_start starts it and arms dockerd_stop, which removes every process, mount, link and
# directory it made; the caller traps EXIT/INT/TERM to dockerd_stop.
DEPLOY_NAME=${DEPLOY_NAME:-codespace-deploy}
# /run, not /var/run: /var/run is a symlink to it, and mountinfo names the real path.
DOCKERD_SOCK=/run/docker-$DEPLOY_NAME.sock
DOCKERD_DATA=/var/lib/$DEPLOY_NAME/docker
DOCKERD_EXEC=/run/$DEPLOY_NAME-docker
DOCKERD_PIDFILE=/run/$DEPLOY_NAME-docker.pid
DOCKERD_CONFIG=/run/$DEPLOY_NAME-daemon.json
DOCKERD_LOG=${DOCKERD_LOG:-/tmp/$DEPLOY_NAME-dockerd.log}
# Debian's docker.io client, not whatever else PATH has.
DOCKER_BIN=/usr/bin/docker
export DOCKER_HOST=unix://$DOCKERD_SOCK
docker() { "$DOCKER_BIN" "$@"; }

dockerd_start() {
  if [ -e "$DOCKERD_SOCK" ] || [ -e "$DOCKERD_PIDFILE" ]; then
    echo "deploy: $DOCKERD_SOCK or $DOCKERD_PIDFILE exists: another run, or a leftover; removing" >&2
    dockerd_stop
  fi
  mkdir -p "$DOCKERD_DATA" "$DOCKERD_EXEC"
  # An empty config: nothing from /etc/docker/daemon.json.
  echo '{}' >"$DOCKERD_CONFIG"
  /usr/sbin/dockerd --config-file "$DOCKERD_CONFIG" --host "unix://$DOCKERD_SOCK" \
    --data-root "$DOCKERD_DATA" --exec-root "$DOCKERD_EXEC" --pidfile "$DOCKERD_PIDFILE" \
    --iptables=false --ip6tables=false --bridge=none --ip-forward=false --ip-masq=false \
    --userland-proxy=false --storage-driver=overlay2 --log-level=warn >"$DOCKERD_LOG" 2>&1 &
  DOCKERD_PID=$!
  for _ in $(seq 1 150); do
    if docker version >/dev/null 2>&1; then return 0; fi
    if ! kill -0 "$DOCKERD_PID" 2>/dev/null; then break; fi
    sleep 0.2
  done
  echo "deploy: dockerd did not start; its log:" >&2
  tail -20 "$DOCKERD_LOG" >&2
  return 1
}

# Every process whose /proc/PID/cmdline names our exec root or data root (dockerd's containerd,
# shims), by pid. Never matched by name alone: another dockerd on this machine is not ours.
_dockerd_our_pids() {
  local p
  for p in /proc/[0-9]*; do
    tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -qE -- "$DOCKERD_EXEC|$DOCKERD_DATA|$DOCKERD_SOCK" &&
      echo "${p#/proc/}"
  done
}

dockerd_stop() {
  set +e
  if docker version >/dev/null 2>&1; then
    local ids
    ids=$(docker ps -aq)
    [ -n "$ids" ] && docker rm -f $ids >/dev/null 2>&1
    docker network prune -f >/dev/null 2>&1
  fi
  local pid=${DOCKERD_PID:-}
  [ -z "$pid" ] && [ -f "$DOCKERD_PIDFILE" ] && pid=$(cat "$DOCKERD_PIDFILE")
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  fi
  # containerd and shims of ours, if dockerd left any.
  local left
  for _ in 1 2 3; do
    left=$(_dockerd_our_pids)
    [ -z "$left" ] && break
    kill -KILL $left 2>/dev/null
    sleep 0.3
  done
  # Mounts under our roots (overlay layers, netns pins, shm), deepest first.
  local m
  for _ in 1 2 3; do
    m=$(awk -v a="$DOCKERD_DATA" -v b="$DOCKERD_EXEC" '$5 ~ "^"a || $5 ~ "^"b {print $5}' \
      /proc/self/mountinfo | sort -r)
    [ -z "$m" ] && break
    for x in $m; do umount -l "$x" 2>/dev/null; done
  done
  rm -rf "$DOCKERD_DATA" "$DOCKERD_EXEC" "/var/lib/$DEPLOY_NAME"
  rm -f "$DOCKERD_SOCK" "$DOCKERD_PIDFILE" "$DOCKERD_CONFIG" "$DOCKERD_LOG"
  # Links docker made (a compose network's bridge, veths), if any survived.
  local l
  for l in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E '^(br-|docker)'); do
    ip link del "$l" 2>/dev/null
  done
  set -e
}

# What must be gone after dockerd_stop; prints each leftover, returns 1 if any.
dockerd_leftovers() {
  local bad=0
  [ -n "$(_dockerd_our_pids)" ] && { echo "leftover processes: $(_dockerd_our_pids)"; bad=1; }
  grep -qE "$DOCKERD_DATA|$DOCKERD_EXEC" /proc/self/mountinfo && { echo "leftover mounts"; bad=1; }
  for f in "$DOCKERD_SOCK" "$DOCKERD_PIDFILE" "$DOCKERD_DATA" "$DOCKERD_EXEC"; do
    [ -e "$f" ] && { echo "leftover $f"; bad=1; }
  done
  ip -o link show | grep -qE ': (br-|docker)' && { echo "leftover docker link"; bad=1; }
  if command -v iptables-save >/dev/null && iptables-save 2>/dev/null | grep -qi docker; then
    echo "leftover iptables rule naming docker"; bad=1
  fi
  return $bad
}
