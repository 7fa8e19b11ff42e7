#!/usr/bin/env bash
# `make test-deploy` (issue 16, docs/deployment.md): Dockerfile.worker built with Debian's
# docker.io on a dockerd of our own, docker-compose.yml run with Debian's docker-compose (v1) in
# the shipped and the confining posture, and the .deb installed into a clean container.
#
# Network: the image build's apt-get reaches Debian's packages through the host's network
# (`docker build --network host`, the build only); every container that runs has
# network_mode none, so nothing a run or a test sends leaves the machine.
# Clean-up: dockerd, containerd, shims, mounts, links, sockets and the data root are removed at
# the end, also on failure or interrupt (trap). Cached between runs, in $DEPLOY_CACHE: the
# mmdebstrap base tarball and `docker save` of the base, build-stage and worker images (the
# build's layer cache, reloaded with --cache-from).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
DEPLOY_NAME=codespace-deploy
source "$here/dockerd.sh"
source "$here/base_image.sh"
IMAGES_TAR=$DEPLOY_CACHE/images.tar
work=$(mktemp -d /tmp/codespace-deploy.XXXXXX)
project=csdeploy$$
passed=0 failed=0
t0=$(date +%s)

compose() { docker-compose --project-directory "$src" -p "$project" "$@"; }

cleanup() {
  local rc=$?
  set +e
  compose -f "$src/docker-compose.yml" -f "$here/compose.test.yml" down -v --remove-orphans >/dev/null 2>&1
  dockerd_stop
  rm -rf "$work"
  if ! dockerd_leftovers; then echo "deploy: clean-up left the above behind" >&2; rc=1; fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ok() { echo "PASS: $1"; passed=$((passed + 1)); }
bad() { echo "FAIL: $1" >&2; failed=$((failed + 1)); }
check() {  # check NAME CONDITION-COMMAND...
  local name=$1; shift
  if "$@"; then ok "$name"; else bad "$name"; fi
}
step() { echo "--- $* ($(($(date +%s) - t0)) s)"; }

step "dockerd of our own on $DOCKERD_SOCK"
dockerd_start
trap cleanup EXIT
if [ -s "$IMAGES_TAR" ]; then
  step "loading cached images"
  docker load -q -i "$IMAGES_TAR" >/dev/null || rm -f "$IMAGES_TAR"
fi
step "Debian 12 base images"
base_images

step "docker build -f Dockerfile.worker (build stage, then the runtime image)"
cache_from=()
ids_before=$(docker image inspect -f '{{.Id}}' codespace-deploy/build:cache codespace/worker:test 2>/dev/null | tr '\n' ' ' || true)
docker image inspect codespace-deploy/build:cache >/dev/null 2>&1 &&
  cache_from=(--cache-from codespace-deploy/build:cache --cache-from codespace/worker:test)
docker build -q --network host "${cache_from[@]}" -f "$src/Dockerfile.worker" --target build \
  -t codespace-deploy/build:cache "$src" >/dev/null
docker build -q --network host "${cache_from[@]}" --cache-from codespace-deploy/build:cache \
  -f "$src/Dockerfile.worker" -t codespace/worker:test "$src" >/dev/null
ids_after=$(docker image inspect -f '{{.Id}}' codespace-deploy/build:cache codespace/worker:test | tr '\n' ' ')
echo "    images before: ${ids_before:-none}; after: $ids_after" | sed 's/sha256:\([0-9a-f]\{12\}\)[0-9a-f]*/\1/g'
if [ "$ids_after" != "${ids_before:-}" ] || [ ! -s "$IMAGES_TAR" ]; then
  step "saving the image cache"
  docker save -o "$IMAGES_TAR.partial" debian:bookworm debian:bookworm-slim \
    codespace-deploy/build:cache codespace/worker:test && mv "$IMAGES_TAR.partial" "$IMAGES_TAR"
fi

# --- the image itself ---------------------------------------------------------------------
user=$(docker image inspect -f '{{.Config.User}}' codespace/worker:test)
check "image runs as uid 1654" [ "$user" = "1654:1654" ]
check "image has a healthcheck on the API socket" \
  bash -c "docker image inspect -f '{{json .Config.Healthcheck}}' codespace/worker:test | grep -q /v1/posture"
missing=$(docker run --rm --network none --entrypoint sh codespace/worker:test -c \
  'ldd /usr/bin/codespace /usr/libexec/codespace/codespace-init 2>&1 | grep "not found" || true')
check "runtime image has every library the binaries link (ldd)" [ -z "$missing" ]

printf 'stop_grace_ms = 5000\nstate_dri = "/x"\n' >"$work/bad.toml"
bad_out=$(docker run --rm --network none -v "$work/bad.toml:/etc/codespace/worker.toml:ro" \
  codespace/worker:test worker 2>&1) && bad_rc=0 || bad_rc=$?
echo "    bad worker.toml: exit $bad_rc: $bad_out"
check "worker refuses to start on a bad /etc/codespace/worker.toml, naming line and key" \
  bash -c "[ $bad_rc = 125 ] && grep -q 'worker.toml:2: unknown setting \"state_dri\"' <<<'$bad_out'"

# Waits for the worker's API to answer; prints the worker's log on failure.
wait_worker() {
  local cid
  for _ in $(seq 1 100); do
    cid=$(compose "${files[@]}" ps -q worker)
    if [ -n "$cid" ] && docker exec "$cid" curl -fsS --unix-socket /run/codespace/api.sock \
      http://localhost/v1/posture >/dev/null 2>&1; then
      return 0
    fi
    sleep 0.3
  done
  compose "${files[@]}" logs worker >&2
  return 1
}
client() { compose "${files[@]}" run --rm -T client "$@" 2>>"$work/compose.log"; }
# Submits through the API (the client container) and waits until the record is final.
run_to_end() {  # run_to_end OUT_JSON_FILE SUBMIT-ARGS...
  local out=$1; shift
  local id state
  id=$(client --quiet submit "$@" | tail -1 | tr -d '\r')
  for _ in $(seq 1 100); do
    client show "$id" --json >"$out" 2>/dev/null || true
    state=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["state"])' "$out" 2>/dev/null || echo "")
    case "$state" in exited | aborted | refused | cancelled | lost) echo "$id"; return 0 ;; esac
    sleep 0.3
  done
  echo "$id"
  return 1
}
field() { python3 -c 'import json,sys; v=json.load(open(sys.argv[1])).get(sys.argv[2]); print("" if v is None else v)' "$1" "$2"; }

# --- shipped posture ----------------------------------------------------------------------
step "docker-compose: the shipped posture"
files=(-f "$src/docker-compose.yml" -f "$here/compose.test.yml")
compose "${files[@]}" up -d --no-build worker >/dev/null 2>&1
wait_worker
posture=$(compose "${files[@]}" logs --no-color worker | grep -o 'posture uid=.*' | head -1)
echo "    worker: $posture"
check "shipped: posture line says confines=no" grep -q 'confines=no' <<<"$posture"
check "shipped: worker is uid 1654" grep -q 'uid=1654' <<<"$posture"
api_posture=$(client posture)
check "shipped: client reads the posture through the API socket volume" \
  grep -q 'confines=no' <<<"$api_posture"

id=$(run_to_end "$work/none.json" --egress none -- sh -c 'ip -o link; echo none-ran')
state=$(field "$work/none.json" state) net=$(field "$work/none.json" network)
echo "    none: state=$state network=$net reason=$(field "$work/none.json" reason)"
check "shipped: a none run is severed by a namespace of its own or aborted" \
  bash -c "[ '$state' = aborted ] || { [ '$state' = exited ] && [ '$net' = severed ]; }"
none_logs=$(client logs "$id" || true)
check "shipped: an aborted none run's command never ran" \
  bash -c "[ '$state' != aborted ] || ! grep -q none-ran <<<'$none_logs'"

id=$(run_to_end "$work/allow.json" --egress allowlist --allow 203.0.113.7:443 -- sh -c 'ip -o link; echo allow-ran')
allow_logs=$(client logs "$id" || true)
state=$(field "$work/allow.json" state) net=$(field "$work/allow.json" network)
echo "    allowlist: state=$state network=$net reason=$(field "$work/allow.json" reason)"
check "shipped: an allowlist run is aborted or filtered, never on the container's network" \
  bash -c "[ '$state' = aborted ] || [ '$net' = filtered ]"
check "shipped: the allowlist run's command never ran shared" bash -c "[ '$net' != shared ]"
check "shipped: an aborted allowlist run's command never ran" \
  bash -c "[ '$state' != aborted ] || ! grep -q allow-ran <<<'$allow_logs'"

marker=deploy-open-$$
id=$(run_to_end "$work/open.json" --egress open -- sh -c "echo $marker")
state=$(field "$work/open.json" state) net=$(field "$work/open.json" network)
echo "    open: state=$state network=$net"
check "shipped: an open run is shared and exits 0" \
  bash -c "[ '$state' = exited ] && [ '$net' = shared ] && [ '$(field "$work/open.json" exit_code)' = 0 ]"
logs_out=$(client logs "$id" || true)
check "shipped: its log comes back through the API socket volume" grep -q "$marker" <<<"$logs_out"
runs_out=$(client runs || true)
check "shipped: the record is listed through the API" grep -q "$id" <<<"$runs_out"
compose "${files[@]}" down -v >/dev/null 2>&1

# --- confining posture --------------------------------------------------------------------
step "docker-compose: the confining override"
files=(-f "$src/docker-compose.yml" -f "$src/docker-compose.confined.yml" -f "$here/compose.test.yml")
compose "${files[@]}" up -d --no-build worker >/dev/null 2>&1
if wait_worker; then
  posture=$(compose "${files[@]}" logs --no-color worker | grep -o 'posture uid=.*' | head -1)
  echo "    worker: $posture"
  check "confined: posture line says confines=yes" grep -q 'confines=yes' <<<"$posture"
  id=$(run_to_end "$work/cnone.json" --egress none -- sh -c 'ip -o link | cut -d: -f2 | tr -d " "')
  state=$(field "$work/cnone.json" state) net=$(field "$work/cnone.json" network)
  echo "    none: state=$state network=$net plan=$(field "$work/cnone.json" plan)"
  check "confined: a none run is severed by bubblewrap" \
    bash -c "[ '$state' = exited ] && [ '$net' = severed ] && [ '$(field "$work/cnone.json" plan)' = severed ]"
  links=$(client logs "$id" | tr -d '\r' | sort | tr '\n' ' ')
  check "confined: the severed run saw only lo" [ "$links" = "lo " ]
else
  bad "confined: the worker's API never answered"
fi
compose "${files[@]}" down -v >/dev/null 2>&1

# --- the .deb in a clean container --------------------------------------------------------
step ".deb: apt-get install in a clean container with no network"
cid=$(docker create codespace-deploy/build:cache true)
docker cp "$cid:/codespace.deb" "$work/" >/dev/null
docker rm "$cid" >/dev/null
deb=$work/codespace.deb
deps=$(dpkg-deb -f "$deb" Depends)
echo "    Depends: $deps"
check ".deb depends on bubblewrap, nftables, iproute2" \
  bash -c "grep -q bubblewrap <<<'$deps' && grep -q nftables <<<'$deps' && grep -q iproute2 <<<'$deps'"
listing=$(dpkg-deb -c "$deb" | awk '{print $6}')
has() { grep -qx "$1" <<<"$listing"; }
check ".deb has the binaries, the unit, the configuration and the man page" bash -c \
  "$(declare -f has); listing='$listing'; has ./usr/bin/codespace && has ./usr/libexec/codespace/codespace-init &&
   has ./lib/systemd/system/codespace-worker.service && has ./etc/codespace/worker.toml &&
   has ./usr/share/doc/codespace/examples/worker.toml.example && has ./usr/share/man/man1/codespace.1.gz"
check ".deb: /etc/codespace/worker.toml is a conffile" bash -c "dpkg-deb --ctrl-tarfile '$deb' | tar -xOf - ./conffiles | grep -qx /etc/codespace/worker.toml"
# The dependencies are not downloadable without a network: a derived image gets them first
# (built with --network host, like the worker's), from the .deb's own Depends: field, so the
# offline `apt-get install ./codespace.deb` below shows that field is complete and installable.
pkgs=$(sed 's/([^)]*)//g; s/|[^,]*//g; s/,/ /g' <<<"$deps")
mkdir -p "$work/debctx"
printf 'FROM debian:bookworm-slim\nRUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends %s && rm -rf /var/lib/apt/lists/*\n' "$pkgs" >"$work/debctx/Dockerfile"
docker build -q --network host -t codespace-deploy/debtest "$work/debctx" >/dev/null
out=$(docker run --rm --network none -v "$work:/deb:ro" \
  --security-opt seccomp=unconfined --security-opt systempaths=unconfined \
  codespace-deploy/debtest sh -c '
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q /deb/codespace.deb >/tmp/apt.log 2>&1 || { cat /tmp/apt.log; exit 3; }
    # A container'"'"'s root has no CAP_SYS_ADMIN: it cannot give runs a uid of their own, so it
    # refuses (never runs a command as uid 0); a user runs codespace as itself.
    if codespace posture >/tmp/root-posture 2>&1; then echo "root-posture: not refused"; else
      echo "root-posture: refused: $(grep -o "identityError=.*CAP_SYS_ADMIN" /tmp/root-posture | head -c 80)"; fi
    mkdir -p /tmp/ws /tmp/state && chown 1654:1654 /tmp/ws /tmp/state
    as_user() { setpriv --reuid 1654 --regid 1654 --clear-groups env HOME=/tmp CODESPACE_STATE_DIR=/tmp/state "$@"; }
    as_user codespace posture || exit 4
    as_user codespace run --workspace /tmp/ws --egress none -- sh -c "ip -o link | cut -d: -f2 | tr -d \" \"" || exit 5
    as_user codespace show latest | grep -E "^(plan|network):"
    man -w codespace >/dev/null 2>&1 || test -f /usr/share/man/man1/codespace.1.gz || exit 6
  ' 2>&1) && rc=0 || rc=$?
echo "$out" | sed 's/^/    /'
check ".deb installs offline with apt-get install ./codespace.deb" bash -c "[ $rc != 3 ]"
check ".deb: root without CAP_SYS_ADMIN refuses, naming what it lacks" \
  grep -q 'root-posture: refused: identityError=.*CAP_SYS_ADMIN' <<<"$out"
check ".deb: codespace posture works" bash -c "[ $rc = 0 ] || [ $rc -gt 4 ]"
# The output goes in as an argument, not spliced into the script: it may hold quotes.
check ".deb: a severed run works (only lo, plan severed)" bash -c \
  '[ "$1" = 0 ] && grep -qx lo <<<"$2" && grep -q "network: *severed" <<<"$2"' _ "$rc" "$out"

step "done"
echo "test-deploy: $(($(date +%s) - t0)) s"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
