#!/usr/bin/env bash
# Build (once) the local test image localhost/subm-test:bookworm: a minimal
# Debian 12 rootfs with bash + python3 (standard library only), made with
# debootstrap from the Debian mirror apt already uses and `docker import`ed.
# No registry access is needed.  Idempotent; prints the tag on success.
#
#   scripts/test-image.sh             # build if missing, print tag
#   scripts/test-image.sh --rebuild   # drop the cached rootfs and rebuild
#
# Environment:
#   SUBM_DEBIAN_MIRROR  mirror URL (default: first bookworm `deb` source found in
#                       /etc/apt/sources.list{,.d/*.list,.d/*.sources},
#                       else http://deb.debian.org/debian)
#   SUBM_CACHE_DIR      cache dir for the cleaned rootfs tarball
#                       (default /var/cache/subm); a run after `docker rmi`
#                       only re-imports it (seconds).
#
# The `localhost/` prefix matters: YARN's docker.trusted.registries matches on
# it.  The daemon has no bridge, so run containers with `--network host`.
set -euo pipefail

TAG="localhost/subm-test:bookworm"
SUITE="bookworm"
CACHE_VERSION="v1"   # bump when the rootfs recipe below changes
CACHE_DIR="${SUBM_CACHE_DIR:-/var/cache/subm}"
CACHE_TAR="$CACHE_DIR/subm-test-$SUITE-rootfs-$CACHE_VERSION.tar"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

log() { echo "test-image: $*" >&2; }
die() { echo "test-image: $*" >&2; exit 1; }

REBUILD=0
case "${1:-}" in
    "") ;;
    --rebuild) REBUILD=1 ;;
    -h|--help) sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument: $1" ;;
esac

# --- docker daemon ---------------------------------------------------------
if ! docker info >/dev/null 2>&1; then
    "$HERE/docker-up.sh" || die "no docker daemon (scripts/docker-up.sh failed)"
fi

image_present() { docker image inspect "$TAG" >/dev/null 2>&1; }

if [ "$REBUILD" = 0 ] && image_present; then
    echo "$TAG"; exit 0
fi

[ "$(id -u)" = 0 ] || die "building $TAG needs root (debootstrap, $CACHE_DIR)"
mkdir -p "$CACHE_DIR"

# Serialise concurrent builds; re-check after getting the lock.
exec 9>"$CACHE_DIR/subm-test.lock"
flock 9
if [ "$REBUILD" = 0 ] && image_present; then
    echo "$TAG"; exit 0
fi
[ "$REBUILD" = 1 ] && rm -f "$CACHE_TAR"

IMPORT_CHANGES=(
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
    --change 'ENV LANG=C.UTF-8'
    --change 'CMD ["bash"]'
    --change "LABEL org.opencontainers.image.title=subm-test org.opencontainers.image.description=debootstrap-minbase-$SUITE-python3 subm.test-image.recipe=$CACHE_VERSION"
)

do_import() {  # reads a tar on stdin
    docker import "${IMPORT_CHANGES[@]}" --message "subm test image ($SUITE minbase + python3)" - "$TAG" >/dev/null
}

# --- fast path: cached rootfs tarball ---------------------------------------
if [ -s "$CACHE_TAR" ]; then
    log "importing cached rootfs $CACHE_TAR"
    if do_import <"$CACHE_TAR" && image_present; then
        echo "$TAG"; exit 0
    fi
    log "import of cached rootfs failed; rebuilding it"
    rm -f "$CACHE_TAR"
fi

# --- mirror ------------------------------------------------------------------
find_mirror() {
    local f
    # one-line format: deb [opts] URI SUITE COMPONENTS...
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -r "$f" ] || continue
        awk -v s="$SUITE" '
            /^[[:space:]]*deb[[:space:]]/ {
                sub(/^[[:space:]]*deb[[:space:]]+/, "")
                if ($0 ~ /^\[/) sub(/^\[[^]]*\][[:space:]]*/, "")
                if ($2 == s) { print $1; exit }
            }' "$f"
    done
    # deb822 format: stanzas with Types/URIs/Suites/Enabled
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -r "$f" ] || continue
        awk -v s="$SUITE" '
            function flush() {
                if (types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " s " ") && tolower(enabled) != "no" && uris != "") {
                    split(uris, u, " "); print u[1]; found = 1
                }
                types = uris = suites = enabled = ""
            }
            /^[[:space:]]*#/ { next }
            /^[[:space:]]*$/ { flush(); if (found) exit; next }
            {
                key = tolower($1); $1 = ""; sub(/^[[:space:]]+/, "")
                if (key == "types:") types = $0
                else if (key == "uris:") uris = $0
                else if (key == "suites:") suites = $0
                else if (key == "enabled:") enabled = $0
            }
            END { if (!found) flush() }' "$f"
    done
}
MIRROR="${SUBM_DEBIAN_MIRROR:-$(find_mirror | head -n1)}"
MIRROR="${MIRROR:-http://deb.debian.org/debian}"
MIRROR="${MIRROR%/}"

# --- debootstrap ---------------------------------------------------------------
if ! command -v debootstrap >/dev/null 2>&1; then
    log "installing debootstrap"
    export DEBIAN_FRONTEND=noninteractive
    { apt-get install -y debootstrap || { apt-get update && apt-get install -y debootstrap; }; } >&2 \
        || die "cannot install debootstrap"
fi

WORK="$(mktemp -d /var/tmp/subm-rootfs.XXXXXX)"
ROOT="$WORK/rootfs"
cleanup() {
    # debootstrap normally unmounts; be safe before rm -rf.
    local m
    for m in proc sys dev/pts dev; do
        if mountpoint -q "$ROOT/$m" 2>/dev/null; then umount -l "$ROOT/$m" || true; fi
    done
    rm -rf "$WORK" "$CACHE_TAR.tmp"
}
trap cleanup EXIT

log "debootstrap --variant=minbase --include=python3 $SUITE from $MIRROR (log: $WORK/debootstrap.log)"
if ! debootstrap --variant=minbase --include=python3 "$SUITE" "$ROOT" "$MIRROR" >"$WORK/debootstrap.log" 2>&1; then
    tail -n 20 "$WORK/debootstrap.log" >&2
    cp -f "$WORK/debootstrap.log" "$CACHE_DIR/debootstrap-failed.log" 2>/dev/null || true
    die "debootstrap failed (log kept at $CACHE_DIR/debootstrap-failed.log)"
fi

# --- slim the rootfs -----------------------------------------------------------
(
    cd "$ROOT"
    rm -rf var/lib/apt/lists/* var/cache/apt/* var/cache/debconf/*-old var/lib/dpkg/*-old \
           usr/share/doc/* usr/share/man/* usr/share/info/* usr/share/locale/* \
           usr/share/lintian usr/share/linda usr/share/common-licenses \
           var/log/*.log var/log/apt/* tmp/* var/tmp/*
    # Host-specific files copied in by debootstrap; docker bind-mounts its own.
    : >etc/resolv.conf
    rm -f etc/hostname
    # Keep future `apt-get install`s in derived images just as lean.
    mkdir -p etc/dpkg/dpkg.cfg.d etc/apt/apt.conf.d
    cat >etc/dpkg/dpkg.cfg.d/01-subm-nodoc <<'EOF'
path-exclude=/usr/share/doc/*
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/locale/*
EOF
    cat >etc/apt/apt.conf.d/01-subm-clean <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/*.bin || true"; };
Acquire::Languages "none";
EOF
)
# sanity: the image must provide bash and a stdlib python3
[ -x "$ROOT/bin/bash" ] || die "rootfs has no /bin/bash"
chroot "$ROOT" /usr/bin/python3 -c 'import json, socket, subprocess, sqlite3, ssl' \
    || die "python3 in rootfs is broken"
log "rootfs: $(du -sh "$ROOT" | cut -f1)"

# --- import (and cache the tarball on the way) ----------------------------------
tar --numeric-owner --xattrs -C "$ROOT" \
    --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' --exclude='./run/*' \
    -cf - . \
    | tee "$CACHE_TAR.tmp" \
    | do_import \
    || die "docker import failed"
mv -f "$CACHE_TAR.tmp" "$CACHE_TAR"

image_present || die "image $TAG missing after import"
echo "$TAG"
