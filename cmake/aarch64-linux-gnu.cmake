# Cross-compiling for 64-bit ARM Linux with Debian's gcc-aarch64-linux-gnu;
# the programs run on an x86 host under qemu-aarch64 (tools/ci_neon.sh):
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DKARA_KERNELS_ONLY=ON
# The full build (library and `kara` command) also needs Debian's arm64
# libyaml (dpkg --add-architecture arm64; apt-get install libyaml-dev:arm64),
# found in the multiarch folders below (tools/ci_arm_full.sh).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /usr)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
# Static programs need no aarch64 sysroot at run time under qemu, so the
# libraries found must be archives.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")
set(KARA_YAML_NAMES libyaml.a)
# FindOpenMP would pick the cross compiler's libgomp.so: take its archive.
file(GLOB KARA_CROSS_GOMP /usr/lib/gcc-cross/aarch64-linux-gnu/*/libgomp.a)
if(KARA_CROSS_GOMP)
  list(GET KARA_CROSS_GOMP 0 KARA_CROSS_GOMP)
  set(OpenMP_gomp_LIBRARY ${KARA_CROSS_GOMP} CACHE FILEPATH "libgomp archive for static aarch64 programs")
endif()
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
