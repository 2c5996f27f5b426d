#!/usr/bin/env bash
# Build the tiny local test image `rfs-test-busybox:latest` without any
# registry: a rootfs made of the host's static busybox, imported with
# `docker import`.
#
# Idempotent: the rootfs content is hashed and stamped on the image as the
# label `rfs-test-image-hash`; when an image with that tag and hash
# already exists, nothing is imported.
#
# Works on a fresh Debian machine as root: installs `busybox-static` (running
# `apt-get update` first) only when /bin/busybox is missing.
set -euo pipefail

IMAGE="${RFS_TEST_IMAGE:-rfs-test-busybox:latest}"
HASH_LABEL="rfs-test-image-hash"

log() { printf 'docker-test-image: %s\n' "$*" >&2; }

BUSYBOX=/bin/busybox
if [ ! -x "$BUSYBOX" ]; then
  log "installing busybox-static"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq busybox-static >/dev/null
fi
if [ ! -x "$BUSYBOX" ]; then
  log "error: $BUSYBOX is still missing after installing busybox-static"
  exit 1
fi
# The image must not depend on host libraries.
if ! "$BUSYBOX" --list >/dev/null 2>&1; then
  log "error: $BUSYBOX does not run"
  exit 1
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
root="$work/rootfs"
mkdir -p "$root/bin" "$root/etc" "$root/home" "$root/root" "$root/tmp"
chmod 1777 "$root/tmp"
cp "$BUSYBOX" "$root/bin/busybox"
for applet in $("$BUSYBOX" --list); do
  [ "$applet" = busybox ] && continue
  ln -sf busybox "$root/bin/$applet"
done
cat >"$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
rfs:x:1000:1000:rfs:/home/rfs:/bin/sh
EOF
cat >"$root/etc/group" <<'EOF'
root:x:0:
rfs:x:1000:
EOF

# Deterministic archive so that the hash only changes with the content.
tarball="$work/rootfs.tar"
tar -C "$root" --sort=name --owner=0 --group=0 --numeric-owner \
  --mtime='2000-01-01 00:00:00Z' -cf "$tarball" .
hash="$(sha256sum "$tarball" | cut -d' ' -f1)"

current="$(docker image inspect --format "{{ index .Config.Labels \"$HASH_LABEL\" }}" "$IMAGE" 2>/dev/null || true)"
if [ "$current" = "$hash" ]; then
  log "$IMAGE is up to date ($hash)"
  exit 0
fi

log "importing $IMAGE ($hash)"
docker import \
  --change 'CMD ["/bin/sh"]' \
  --change 'ENV PATH=/bin' \
  --change "LABEL $HASH_LABEL=$hash" \
  - "$IMAGE" <"$tarball" >/dev/null
log "built $IMAGE"
