# Cross build for 64-bit ARM Linux (DGX OS / DGX Spark, Debian arm64) with Debian's cross
# toolchain (crossbuild-essential-arm64). The target's libraries and headers come from an arm64
# root that scripts/cross-arm64.sh extracts from Debian's arm64 packages; code generators
# (protoc, grpc_cpp_plugin) run from the build machine. Use it through scripts/cross-arm64.sh, or:
#   cmake -S . -B build-arm64/build -G Ninja -DTANDEM_CUDA=OFF \
#     -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64-linux-gnu.cmake -DTANDEM_ARM64_SYSROOT=DIR
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# The toolchain file is read again for every try_compile: the root travels through the cache
# variable (forwarded to try_compile) or the environment.
if(NOT TANDEM_ARM64_SYSROOT AND DEFINED ENV{TANDEM_ARM64_SYSROOT})
  set(TANDEM_ARM64_SYSROOT "$ENV{TANDEM_ARM64_SYSROOT}")
endif()
if(NOT TANDEM_ARM64_SYSROOT OR NOT EXISTS "${TANDEM_ARM64_SYSROOT}/usr/include")
  message(FATAL_ERROR "TANDEM_ARM64_SYSROOT must name the arm64 root (scripts/cross-arm64.sh makes it)")
endif()
set(TANDEM_ARM64_SYSROOT "${TANDEM_ARM64_SYSROOT}" CACHE PATH "arm64 root with the target's -dev packages")
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES TANDEM_ARM64_SYSROOT)
set(CMAKE_SYSROOT "${TANDEM_ARM64_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH "${TANDEM_ARM64_SYSROOT}")

# Libraries, headers and CMake packages from the arm64 root only; programs from the build machine.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# pkg-config (cpp-httplib, pcre2, utf8proc) must read the arm64 .pc files and prefix their paths.
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${TANDEM_ARM64_SYSROOT}")
set(ENV{PKG_CONFIG_LIBDIR} "${TANDEM_ARM64_SYSROOT}/usr/lib/aarch64-linux-gnu/pkgconfig:${TANDEM_ARM64_SYSROOT}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")

