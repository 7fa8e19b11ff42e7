#!/usr/bin/env bash
# `make deb`: builds build-release/codespace_VERSION_ARCH.deb from a release build that
# `make install DESTDIR=... PREFIX=/usr` staged (stripped binaries). Depends: bubblewrap,
# nftables and iproute2 (what a run needs at run time) and the shared libraries the binaries
# link, as dpkg-shlibdeps finds them — so the list cannot fall behind a new library.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath -m "${1:?usage: make-deb.sh RELEASE_BUILD_DIR}")
stage=$build/deb/root
version=$(sed -n 's/^project(codespace VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
arch=$(dpkg --print-architecture)
rm -rf "$build/deb"
make -s -C "$src" install-files DESTDIR="$stage" PREFIX=/usr BUILD_RELEASE="$build" >/dev/null

install -D -m 0644 "$src/deploy/codespace-worker.service" "$stage/lib/systemd/system/codespace-worker.service"
install -D -m 0644 "$src/deploy/worker.toml" "$stage/etc/codespace/worker.toml"
install -D -m 0644 "$src/deploy/worker.toml.example" \
  "$stage/usr/share/doc/codespace/examples/worker.toml.example"
install -D -m 0644 "$src/docs/deployment.md" "$stage/usr/share/doc/codespace/deployment.md"

# The man page, from --help (help2man), with every subcommand's --help as its own section.
extra=$build/deb/subcommands.h2m
{
  echo "[COMMANDS]"
  for c in posture plan run submit worker logs cancel runs show; do
    echo ".SS codespace $c"
    echo ".nf"
    "$stage/usr/bin/codespace" "$c" --help | sed 's/\\/\\\\/g; s/^\./\\\&./'
    echo ".fi"
  done
  echo "[FILES]"
  echo "/etc/codespace/worker.toml (see /usr/share/doc/codespace/examples/worker.toml.example),"
  echo "/var/lib/codespace (records), /run/codespace/api.sock (the worker's API)."
} >"$extra"
mkdir -p "$stage/usr/share/man/man1"
help2man --no-info --version-string="$version" --include="$extra" \
  --name="run untrusted commands in bubblewrap sandboxes with an egress policy per run" \
  "$stage/usr/bin/codespace" | gzip -9n >"$stage/usr/share/man/man1/codespace.1.gz"

# Shared-library dependencies of what we ship, as Debian's own packages compute them.
shlib=$build/deb/shlibdeps
mkdir -p "$shlib/debian"
printf 'Source: codespace\n\nPackage: codespace\nArchitecture: any\n' >"$shlib/debian/control"
libs=$(cd "$shlib" && dpkg-shlibdeps -O "$stage/usr/bin/codespace" \
  "$stage/usr/libexec/codespace/codespace-init" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
[ -n "$libs" ] || { echo "make-deb: dpkg-shlibdeps found no libraries" >&2; exit 1; }

mkdir -p "$stage/DEBIAN"
cat >"$stage/DEBIAN/control" <<CONTROL
Package: codespace
Version: $version
Architecture: $arch
Maintainer: codespace <codespace@localhost>
Section: admin
Priority: optional
Depends: $libs, bubblewrap, nftables, iproute2
Installed-Size: $(du -sk "$stage" | cut -f1)
Description: run untrusted commands in bubblewrap sandboxes with an egress policy per run
 codespace runs untrusted commands, above all AI coding-agent CLIs, inside bubblewrap
 sandboxes, gives each run exactly the network egress its policy allows (none, an allowlist,
 or open) and keeps a durable record of every run. The worker runs as the systemd unit
 codespace-worker.service; its API socket is /run/codespace/api.sock (group codespace).
CONTROL
echo /etc/codespace/worker.toml >"$stage/DEBIAN/conffiles"
cat >"$stage/DEBIAN/postinst" <<'POSTINST'
#!/bin/sh
set -e
# The API's clients are the members of this group (the socket is 0660, its directory 0750).
if [ "$1" = configure ] && ! getent group codespace >/dev/null; then
  groupadd --system codespace
fi
if [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi
exit 0
POSTINST
cat >"$stage/DEBIAN/postrm" <<'POSTRM'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi
exit 0
POSTRM
chmod 0755 "$stage/DEBIAN/postinst" "$stage/DEBIAN/postrm"
out=$build/codespace_${version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$stage" "$out" >/dev/null
echo "$out"
