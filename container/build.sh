#!/usr/bin/env bash
# The course's container image, built without a registry (README, "On a cluster"; lesson 00):
# Debian 12 from Debian's package archive (mmdebstrap), with Python 3.11, the C++ toolchain
# lesson 07 builds with, the pinned Python packages (container/requirements.lock, installed from
# wheels with pip) and the course itself in /opt/course. It writes:
#   OUT/course.sqfs   the root file system as one SquashFS file, which ch-run and apptainer run as
#                     it is; `unsquashfs -d DIR` gives the folder other routes start from
#                     (README, "On a cluster")
#   OUT/packages.txt  what the image holds: each Debian package and each Python package, versioned
# One file only: a tarball of the same tree would take 6.4 GB more while the tree is still there.
# Usage (as root: mmdebstrap's root mode and chroot):
#   container/build.sh build [OUT]      the image (make container; OUT: build/container)
#   container/build.sh packages [OUT]   what a build from the same pins installs now, without
#                                       building: Debian's by apt's resolution, Python's the lock
#   container/build.sh lock             resolve requirements.txt for the image's Python into
#                                       container/requirements.lock (make container-lock)
#   container/build.sh room [OUT]       whether OUT has the room a build takes (build checks it
#                                       first: a disk that fills mid-build fails in mksquashfs)
# Needs: mmdebstrap, squashfs-tools (mksquashfs) and a host Python 3.11 with pip ($PYTHON) that
# can reach the pinned wheels (its own pip configuration is used to fetch them).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
LOCK=container/requirements.lock
SUITE=bookworm  # Debian 12
MIRRORS=(
    "deb http://deb.debian.org/debian $SUITE main"
    "deb http://deb.debian.org/debian $SUITE-updates main"
    "deb http://deb.debian.org/debian-security $SUITE-security main"
)
# Python 3.11 with pip (Debian's python3 is the course's Python here), `python` for the batch
# scripts' srun lines, the C++ toolchain of lesson 07 (cmake, a C++20 g++, ninja) and the CA
# certificates pip needs to reach an index from inside the image.
DEBIAN_PACKAGES=python3,python3-pip,python3-venv,python-is-python3,g++,cmake,ninja-build,ca-certificates
# Debian 12's python3. The lock is resolved for it: some current releases need a newer 3.11
# (soupsieve 4.1 wants 3.11.5), so a lock made for the host's Python can fail inside the image.
IMAGE_PYTHON=3.11.2
# Where pip puts packages outside a virtual environment on Debian: Debian's own Python packages
# stay in /usr/lib/python3/dist-packages, apart.
SITE=/usr/local/lib/python3.11/dist-packages
# Wheels only, for the image's Python. Their platform is the host's (Linux x86_64): pip takes
# --platform manylinux_2_36 literally (it widens only manylinux2014 and 2010 to older tags), and
# the wheels of the lock are built for older glibcs than Debian 12's 2.36.
WHEEL_TARGET=(--only-binary=:all: --python-version "$IMAGE_PYTHON")

step() {  # one line per step with its wall time, so a build log shows where the minutes go
    local name=$1 start=$SECONDS
    shift
    "$@"
    echo "container: $name: $((SECONDS - start)) s"
}

lock() {
    local report
    report=$(mktemp)
    "$PYTHON" -m pip install --quiet --dry-run --ignore-installed "${WHEEL_TARGET[@]}" \
        --report "$report" -r requirements.txt
    {
        echo "# requirements.txt resolved for the image's Python ($IMAGE_PYTHON, Debian 12), every package"
        echo "# at one version: container/build.sh installs exactly these (pip --no-deps) and checks them"
        echo "# with pip check. Written by: make container-lock (after a change to requirements.txt)."
        "$PYTHON" -c '
import json, sys
found = json.load(open(sys.argv[1]))["install"]
for name, version in sorted(
    ((i["metadata"]["name"], i["metadata"]["version"]) for i in found), key=lambda p: p[0].lower()
):
    print(f"{name}=={version}")' "$report"
    } >"$LOCK"
    rm -f "$report"
    echo "container: wrote $LOCK ($(grep -c == "$LOCK") packages)"
}

wheels() {  # the lock's wheels, fetched by the host's pip with its own configuration
    # Kept between builds with the lock they were fetched for: pip would read all 3 GB again.
    if cmp -s "$LOCK" "$out/wheels/requirements.lock"; then return; fi
    "$PYTHON" -m pip download --quiet --no-deps "${WHEEL_TARGET[@]}" -d "$out/wheels" -r "$LOCK"
    cp "$LOCK" "$out/wheels/requirements.lock"
}

debian() {
    rm -rf "$rootfs"
    # Debian's packages are kept between builds in OUT/debs (mmdebstrap's own recipe for a cache:
    # apt then downloads only what changed in the archive).
    mkdir -p "$out/debs"
    # shellcheck disable=SC2016  # "$1" is mmdebstrap's: the hooks' own argument, the chroot
    mmdebstrap --quiet --variant=apt --include="$DEBIAN_PACKAGES" --skip=essential/unlink \
        --setup-hook='mkdir -p "$1"/var/cache/apt/archives/' \
        --setup-hook="sync-in $out/debs /var/cache/apt/archives/" \
        --customize-hook="sync-out /var/cache/apt/archives $out/debs" \
        "$SUITE" "$rootfs" "${MIRRORS[@]}"
    local found
    found=$(chroot "$rootfs" python3 -c 'import platform; print(platform.python_version())')
    if [ "$found" != "$IMAGE_PYTHON" ]; then
        echo "container: Debian's python3 is $found, the lock was made for $IMAGE_PYTHON:" \
            "set IMAGE_PYTHON=$found in $0 and run make container-lock" >&2
        return 1
    fi
}

# In the image, without the host's environment (its pip settings name the host's folders).
in_image() { env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root chroot "$rootfs" "$@"; }

python_packages() {
    # The wheels are hard links inside the image while pip installs (no copy, no mount).
    cp -al "$out/wheels" "$rootfs/tmp/wheels"
    cp "$LOCK" "$rootfs/tmp/requirements.lock"
    # --break-system-packages: PEP 668's marker guards Debian's own Python packages. This Python
    # serves the course alone, and pip installs into /usr/local, beside Debian's, not over them.
    local pip=(python3 -m pip install --quiet --no-cache-dir --root-user-action=ignore
        --break-system-packages --no-index --find-links /tmp/wheels --no-deps)
    # pip compiles each module as it installs, on one core; compileall uses every core after it.
    # The bytecode must be in the image: a read-only image cannot cache it at import.
    step "pip: unpack" in_image "${pip[@]}" --no-compile -r /tmp/requirements.lock
    # As pip does, a module this Python cannot compile stays source only (torch ships a few for
    # Python 3.12): quiet=2 and no exit status for them.
    step "pip: bytecode" in_image python3 -c \
        "import compileall; compileall.compile_dir('$SITE', quiet=2, workers=0)"
    rm -rf "$rootfs/tmp/wheels" "$rootfs/tmp/requirements.lock"
    in_image python3 -m pip check
}

course() {
    # The course's files as git sees them (tracked, and new ones not ignored), run from there
    # as from a checkout: an editable install, so the course finds slurm/, cpp/ and the lessons.
    mkdir -p "$rootfs/opt/course"
    git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - |
        tar -xf - -C "$rootfs/opt/course"
    in_image python3 -m pip install --quiet --no-cache-dir --root-user-action=ignore \
        --break-system-packages --no-index --no-deps --no-build-isolation -e /opt/course
    # ch-run binds only onto paths that exist in the image: /mnt/0-9 (its own convention, which
    # `course kernel --container` uses) and /etc/hosts, so that the nodes' names resolve inside.
    mkdir -p "$rootfs"/mnt/{0,1,2,3,4,5,6,7,8,9}
    touch "$rootfs/etc/hosts" "$rootfs/etc/machine-id"
}

# Python names as pip compares them (PEP 503: lower case, "-" for "_" and "."), so that two lists
# of the same packages read the same.
pip_lines() { sed -n 's/^\([^#][^=]*\)==\(.*\)$/\1 \2/p' | awk '{n = tolower($1); gsub(/[_.]/, "-", n); print "pip", n, $2}'; }

installed() {  # the packages the image holds, one per line: deb|pip NAME VERSION
    # shellcheck disable=SC2016  # dpkg-query's own ${field} syntax, not the shell's
    in_image dpkg-query -W -f 'deb ${Package} ${Version}\n'
    in_image python3 -m pip list --path "$SITE" --format=freeze | pip_lines
}

pack() {
    # SquashFS with zstd at level 3: 6.5 GB packed in about 17 s on 2 cores, 53% of the size;
    # mksquashfs's default (gzip) packs several times slower. -all-root: files belong to root.
    mksquashfs "$rootfs" "$out/course.sqfs" -noappend -quiet -no-progress -all-root \
        -comp zstd -Xcompression-level 3
}

# The room a build takes at its peak, in GiB, measured on a build of this lock: Debian's tree
# (6.5) while it is packed, the image (3.2) and, unless an earlier build's are kept, the wheels
# (3.0). CONTAINER_ROOM_GIB sets the first figure (the tests set it to check both answers).
TREE_AND_IMAGE_GIB=${CONTAINER_ROOM_GIB:-10}
WHEELS_GIB=3

kib_of() {  # the size of those of these paths that exist (du fails on the others)
    { du -sk "$@" 2>/dev/null || true; } | awk '{n += $1} END {print n + 0}'
}

room() {  # fails, naming the figures and the fix, where OUT lacks the room a build takes
    out=${1:-build/container}
    mkdir -p "$out"
    local need=$TREE_AND_IMAGE_GIB have
    if ! cmp -s "$LOCK" "$out/wheels/requirements.lock"; then need=$((need + WHEELS_GIB)); fi
    # What the build replaces is room too: an earlier image, tree or tarball in OUT.
    have=$(($(df -Pk "$out" | awk 'NR == 2 {print $4}') + $(kib_of "$out/course.sqfs" \
        "$out/rootfs" "$out/course.tar")))
    if [ "$have" -lt $((need * 1024 * 1024)) ]; then
        echo "container: $out has $((have / 1024 / 1024)) GiB free (counting what a build" \
            "replaces there); a build needs about $need GiB. Free space on that disk, or build" \
            "elsewhere: container/build.sh build OUT (make container CONTAINER=OUT)" >&2
        return 1
    fi
    echo "container: $out has $((have / 1024 / 1024)) GiB free; a build needs about $need GiB"
}

build() {
    out=${1:-build/container}
    rootfs=$out/rootfs
    local start=$SECONDS
    room "$out"
    rm -f "$out/course.tar"  # an earlier build's tarball: builds no longer write one
    step "wheels of the lock" wheels
    step "Debian 12 (mmdebstrap)" debian
    step "Python packages (pip)" python_packages
    step "the course" course
    installed | sort >"$out/packages.txt"
    step "SquashFS" pack
    rm -rf "$rootfs"  # the image holds the same tree (6.5 GB of disk kept free)
    echo "container: the image's packages:"
    cat "$out/packages.txt"
    echo "container: $(grep -c '^deb ' "$out/packages.txt") Debian and" \
        "$(grep -c '^pip ' "$out/packages.txt") Python packages ($out/packages.txt)"
    du -h "$out/course.sqfs"
    echo "container: built in $((SECONDS - start)) s"
}

packages() {
    # apt's resolution of the same Debian packages from the same archive, as mmdebstrap makes it,
    # without installing (--simulate prints apt's "Inst NAME (VERSION ...)" lines)
    mmdebstrap --simulate --verbose --variant=apt --include="$DEBIAN_PACKAGES" "$SUITE" /dev/null \
        "${MIRRORS[@]}" 2>&1 | sed -n 's/^Inst \([^ ]*\) (\([^ ]*\) .*/deb \1 \2/p' | sort -u
    {
        cat "$LOCK"
        grep -m1 '^version' pyproject.toml | sed 's/^version = "\(.*\)"/course-utils==\1/'
    } | pip_lines
}

case ${1:-} in
    build) shift; build "$@" ;;
    packages) packages | sort ;;
    lock) lock ;;
    room) shift; room "$@" ;;
    *) echo "usage: $0 build [OUT] | packages | lock | room [OUT]" >&2; exit 2 ;;
esac
