#!/usr/bin/env bash
# Cross-builds the CPU tree (TANDEM_CUDA=OFF) for arm64 (DGX OS / DGX Spark, Debian arm64) on a
# Debian 12 amd64 machine and makes the arm64 .deb packages. Slow (the whole tree, no ccache hits
# the first time): not part of scripts/test.sh. Needs root (or sudo) for apt the first time.
# Usage: scripts/cross-arm64.sh [-j N]
# Environment: ARM64_DIR (default build-arm64: sysroot/, build/, the .debs in packages/),
#   TANDEM_TESTS=ON (also cross-compile the tests; they cannot run here).
#
# Why a separate arm64 root instead of `dpkg --add-architecture arm64` + apt: prometheus-cpp-dev,
# libgloo-dev and libyaml-cpp-dev are not Multi-Arch: same, so installing their arm64 builds
# removes the amd64 ones the native build needs. The root is extracted from Debian's arm64
# packages (mmdebstrap, no emulator), and its dpkg database is filled in from the same packages
# so that dpkg-shlibdeps can declare the arm64 dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS="$(nproc)"
while [ $# -gt 0 ]; do
  case "$1" in
    -j) JOBS="$2"; shift 2 ;;
    -j*) JOBS="${1#-j}"; shift ;;
    *) echo "usage: $0 [-j N]" >&2; exit 2 ;;
  esac
done
OUT="$(realpath -m "${ARM64_DIR:-build-arm64}")"
SYSROOT="$OUT/sysroot"
# Build machine: what the native build needs (protoc and grpc_cpp_plugin run here), the cross
# compiler, mmdebstrap, file, and qemu to run the packaged programs at the end.
scripts/setup-debian.sh crossbuild-essential-arm64 mmdebstrap file qemu-user-static

# Target: the arm64 -dev packages of scripts/setup-debian.sh's build list (the tools and test
# runners aside), with protobuf-compiler-grpc because gRPC's CMake package checks its files.
TARGET_PKGS=(libc6-dev libstdc++-12-dev zlib1g-dev libgrpc++-dev libprotobuf-dev
  protobuf-compiler-grpc libabsl-dev libyaml-cpp-dev prometheus-cpp-dev libpcre2-dev
  libutf8proc-dev libcpp-httplib-dev libssl-dev libgloo-dev libsystemd-dev nlohmann-json3-dev
  libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev)
stamp="${TARGET_PKGS[*]}"
if [ "$(cat "$SYSROOT/.tandem-packages" 2>/dev/null)" != "$stamp" ]; then
  echo "cross-arm64: making the arm64 root in $SYSROOT"
  rm -rf "$SYSROOT"
  mkdir -p "$OUT"
  includes="$(IFS=,; echo "${TARGET_PKGS[*]}")"
  mmdebstrap --quiet --variant=extract --skip=cleanup/apt/cache --architectures=arm64 \
    --include="$includes" bookworm "$SYSROOT" \
    "deb http://deb.debian.org/debian bookworm main" \
    "deb http://deb.debian.org/debian bookworm-updates main" \
    "deb http://deb.debian.org/debian-security bookworm-security main"
  # Absolute links (libfoo.so -> /lib/aarch64-linux-gnu/...) would point into this machine's
  # root: make them relative to the arm64 root.
  find "$SYSROOT" -type l -lname '/*' ! -path "$SYSROOT/dev/*" -print0 |
    while IFS= read -r -d '' link; do
      target="$(readlink "$link")"
      ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$SYSROOT$target")" "$link"
    done
  # Debian's Gloo CMake package names its library by absolute path (/usr/lib/libgloo...), which
  # would be this machine's: make it relative to the package, as the other packages do.
  sed -i 's|"/usr/lib/libgloo|"${_IMPORT_PREFIX}/lib/libgloo|' "$SYSROOT"/usr/share/cmake/Gloo/GlooTargets-*.cmake
  # dpkg's record of the packages (file lists, shlibs and symbols files) without running their
  # maintainer scripts (arm64 programs, debconf): what dpkg-shlibdeps reads. The file lists
  # carry the root's path, because dpkg-shlibdeps asks dpkg which package holds the library
  # file it found, and it finds them under the root.
  admin="$SYSROOT/var/lib/dpkg"
  mkdir -p "$admin/info" "$admin/updates"
  : > "$admin/status"
  echo 1 > "$admin/info/format"  # file names "pkg:arch.list" for Multi-Arch: same packages
  dpkg --admindir="$admin" --add-architecture arm64
  for deb in "$SYSROOT"/var/cache/apt/archives/*.deb; do
    pkg="$(dpkg-deb -f "$deb" Package)"
    [ "$(dpkg-deb -f "$deb" Multi-Arch)" = same ] && pkg="$pkg:arm64"
    dpkg-deb --fsys-tarfile "$deb" | tar -t | sed -e "s|^\./|$SYSROOT/|" -e 's|/$||' -e '/^$/d' \
      > "$admin/info/$pkg.list"
    ctrl="$(mktemp -d)"
    dpkg-deb -e "$deb" "$ctrl"
    for f in shlibs symbols; do
      [ ! -f "$ctrl/$f" ] || cp "$ctrl/$f" "$admin/info/$pkg.$f"
    done
    rm -rf "$ctrl"
    { dpkg-deb -f "$deb" | sed '1a Status: install ok installed'; echo; } >> "$admin/status"
  done
  rm -f "$SYSROOT"/var/cache/apt/archives/*.deb
  echo "$stamp" > "$SYSROOT/.tandem-packages"
fi

export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-true}"
cmake -S . -B "$OUT/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTANDEM_CUDA=OFF \
  -DTANDEM_TESTS="${TANDEM_TESTS:-OFF}" \
  -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/toolchain-aarch64-linux-gnu.cmake" \
  -DTANDEM_ARM64_SYSROOT="$SYSROOT"
cmake --build "$OUT/build" -j "$JOBS"

for bin in agentd/tandem-agentd controller/tandemctl infer/tandem-infer; do
  desc="$(file -b "$OUT/build/$bin")"
  echo "$bin: $desc"
  case "$desc" in *"ARM aarch64"*) ;; *) echo "cross-arm64: $bin is not an aarch64 program" >&2; exit 1 ;; esac
done

# The packages, dependencies computed by dpkg-shlibdeps against the arm64 root's dpkg record.
(cd "$OUT/build" && DPKG_ADMINDIR="$SYSROOT/var/lib/dpkg" cpack -G DEB -B "$OUT/packages")
for deb in "$OUT"/packages/*.deb; do
  echo "$(basename "$deb"): $(dpkg-deb -f "$deb" Architecture) depends: $(dpkg-deb -f "$deb" Depends)"
  [ "$(dpkg-deb -f "$deb" Architecture)" = arm64 ] || { echo "cross-arm64: $deb is not arm64" >&2; exit 1; }
done

# The packages with nothing but what they declare: Debian 12 arm64 resolves their dependencies
# into a fresh root, and the programs run there under qemu (a library the Depends line lacks
# would not load). tandem-infer runs the tiny test model on the cpu backend.
# The packages reach it through a one-folder apt repository (copied in, nothing mounted).
rm -rf "$OUT/installed" "$OUT/repo"
mkdir -p "$OUT/repo"
cp "$OUT"/packages/*.deb "$OUT/repo/"
(cd "$OUT/repo" && dpkg-scanpackages . > Packages 2>/dev/null)
mmdebstrap --quiet --variant=extract --architectures=arm64 --include=tandem-agentd,tandemctl \
  bookworm "$OUT/installed" \
  "deb http://deb.debian.org/debian bookworm main" \
  "deb http://deb.debian.org/debian-security bookworm-security main" \
  "deb [trusted=yes] copy://$OUT/repo ./"
for bin in tandem-agentd tandemctl tandem-infer; do
  qemu-aarch64-static -L "$OUT/installed" "$OUT/installed/usr/bin/$bin" --version
done
qemu-aarch64-static -L "$OUT/installed" "$OUT/installed/usr/bin/tandem-infer" generate \
  --model tests/data/qwen3moe-tiny --prompt-ids 1,2,3 --max-tokens 6 --json
echo "cross-arm64: OK ($OUT/packages)"
