# Debian 12 images for the deployment lanes without an image registry (sourced by run.sh).
# The base is `mmdebstrap --variant=minbase bookworm` into a tarball, cached between runs in
# $DEPLOY_CACHE, imported into our dockerd, and given this machine's apt mirror configuration
# (its sources and its Acquire:: settings), so that apt-get in a build reaches Debian's packages
# exactly as the machine's own apt does. Tagged debian:bookworm and debian:bookworm-slim (the
# names Dockerfile.worker builds from) only when those images are not present.
DEPLOY_CACHE=${DEPLOY_CACHE:-/var/cache/codespace-deploy}
BASE_TAR=$DEPLOY_CACHE/bookworm-minbase.tar

base_image_tarball() {
  mkdir -p "$DEPLOY_CACHE"
  if [ -s "$BASE_TAR" ]; then return 0; fi
  command -v mmdebstrap >/dev/null || { echo "deploy: mmdebstrap is missing" >&2; return 1; }
  local sources=()
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -s "$f" ] && sources+=("$f")
  done
  echo "deploy: building the Debian 12 base with mmdebstrap (cached in $BASE_TAR)"
  mmdebstrap --quiet --variant=minbase --format=tar bookworm "$BASE_TAR.partial" "${sources[@]}"
  mv "$BASE_TAR.partial" "$BASE_TAR"
}

# A build context holding the host's apt configuration, for the stand-in base image.
_apt_context() {
  local ctx=$1
  mkdir -p "$ctx/apt/sources.list.d" "$ctx/apt/apt.conf.d"
  [ -s /etc/apt/sources.list ] && cp /etc/apt/sources.list "$ctx/apt/"
  for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -s "$f" ] && cp "$f" "$ctx/apt/sources.list.d/"
  done
  # Only the settings that say how to reach the mirror (e.g. an old snapshot's Valid-Until).
  for f in /etc/apt/apt.conf.d/*; do
    grep -q '^[[:space:]]*Acquire::' "$f" 2>/dev/null && cp "$f" "$ctx/apt/apt.conf.d/"
  done
  cat >"$ctx/Dockerfile" <<'DOCKERFILE'
FROM codespace-deploy/minbase
RUN rm -f /etc/apt/sources.list.d/*
COPY apt/ /etc/apt/
DOCKERFILE
}

base_images() {
  local need=()
  for t in debian:bookworm debian:bookworm-slim; do
    docker image inspect "$t" >/dev/null 2>&1 || need+=("$t")
  done
  [ ${#need[@]} -eq 0 ] && return 0
  base_image_tarball
  docker import "$BASE_TAR" codespace-deploy/minbase >/dev/null
  local ctx
  ctx=$(mktemp -d /tmp/codespace-deploy-base.XXXXXX)
  _apt_context "$ctx"
  docker build -q -t codespace-deploy/base "$ctx" >/dev/null
  rm -rf "$ctx"
  for t in "${need[@]}"; do docker tag codespace-deploy/base "$t"; done
}
