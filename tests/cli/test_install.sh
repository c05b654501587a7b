#!/usr/bin/env bash
# ctest-label: slow
# An app developer's view of the library (issue 17): `cmake --install` puts
# the header, libkara.a, the `kara` command, a CMake package and a pkg-config
# file under a prefix; docs/API.md's chat example, compiled against that
# prefix alone (once with pkg-config, once with find_package(kara)), answers
# the README's problem with the project's reasoning model.
set -u
. "$(dirname "$0")/lib/common.sh"
SRC="${KARA_SOURCE_DIR:?KARA_SOURCE_DIR must name the source tree}"
BUILD="$(dirname "$(dirname "$KARA")")"
M="$SRC/tools/train/model/kara-reasoner-1m.gguf"
if ! command -v pkg-config >/dev/null; then
    echo "SKIP: pkg-config is not installed (tools/install_deps.sh installs it)"
    exit 77
fi

P="$tmp/prefix"
cmake --install "$BUILD" --prefix "$P" >"$tmp/install.log" 2>&1
rc=$?
check "cmake --install exits 0 (rc $rc)" '[ $rc -eq 0 ]'
for f in include/kara.h lib/libkara.a bin/kara lib/cmake/kara/kara-config.cmake \
    lib/cmake/kara/kara-config-version.cmake lib/cmake/kara/kara-targets.cmake lib/pkgconfig/kara.pc; do
    check "installed $f" '[ -f "$P/$f" ]'
done
check "no internal header is installed" '[ "$(find "$P/include" -type f | wc -l)" -eq 1 ]'

# the example, as the guide prints it
awk '/^One turn with the project.s reasoning model/ {f = 1} f && /^```c$/ {g = 1; next} g && /^```$/ {exit}
     g {print}' "$SRC/docs/API.md" >"$tmp/app.c"
check "the example is found in docs/API.md" 'grep -q "kara_generator_next" "$tmp/app.c"'
# built_answers HOW RC BINARY: the build of HOW exited RC; its program answers the problem
built_answers() {
    local how=$1 brc=$2 bin=$3
    check "the example builds $how (rc $brc)" '[ $brc -eq 0 ]'
    [ "$brc" -eq 0 ] || return 0
    "$bin" "$M" >"$bin.out" 2>"$bin.err"
    check "the build $how answers 8976" '[ "$(grep -v "^$" "$bin.out" | tail -1)" = "8976" ]'
}

# 0. docs/API.md's link line against the build tree: the CPU line, or the
# CUDA one where the archive holds CUDA objects
if ar t "$BUILD/runtime/libkara.a" | grep -q '\.cu\.o$'; then
    line=$(grep -m1 '^cc -std=c11 .*build/runtime/libkara.a .*-lcudart_static' "$SRC/docs/API.md")
else
    line=$(grep -m1 '^cc -std=c11 .*build/runtime/libkara.a -lyaml -lm -fopenmp -lpthread -o app$' "$SRC/docs/API.md")
fi
check "docs/API.md has the link line for this build" '[ -n "$line" ]'
line=${line//build\/runtime/$BUILD/runtime}
line=${line//-I runtime\/include/-I $SRC/runtime/include}
(cd "$tmp" && eval "$line") >"$tmp/api.log" 2>&1
built_answers "with docs/API.md's link line" $? "$tmp/app"
check "kara.pc names no library by absolute path" '! grep -E "^Libs:.* /" "$P/lib/pkgconfig/kara.pc"'

# 1. pkg-config
export PKG_CONFIG_PATH="$P/lib/pkgconfig"
check "pkg-config knows kara $(pkg-config --modversion kara 2>/dev/null)" 'pkg-config --exists kara'
cc -std=c11 -o "$tmp/app-pc" "$tmp/app.c" $(pkg-config --cflags --libs kara) 2>"$tmp/cc.log"
built_answers "with pkg-config" $? "$tmp/app-pc"
check "its thinking goes to stderr" 'grep -q "p2=6864" "$tmp/app-pc.err"'

# 2. find_package(kara)
mkdir -p "$tmp/cm"
cp "$tmp/app.c" "$tmp/cm/app.c"
cat >"$tmp/cm/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(kara_app C)
find_package(kara 0.1 REQUIRED)
add_executable(app app.c)
target_link_libraries(app PRIVATE kara::kara)
CM
cmake -S "$tmp/cm" -B "$tmp/cm/build" -DCMAKE_PREFIX_PATH="$P" >"$tmp/cm.log" 2>&1 &&
    cmake --build "$tmp/cm/build" >>"$tmp/cm.log" 2>&1
built_answers "with find_package(kara)" $? "$tmp/cm/build/app"
check "the installed command runs" '"$P/bin/kara" --version >/dev/null 2>&1 || "$P/bin/kara" --help >/dev/null 2>&1'

if [ "$fail" -ne 0 ]; then cat "$tmp/install.log" "$tmp/api.log" "$tmp/cc.log" "$tmp/cm.log" 2>/dev/null | tail -40; fi
finish
