#!/usr/bin/env bash
# Install the Debian packages Kara needs (as root, or with sudo). Safe to run
# again: packages already present are skipped.
#
#   tools/install_deps.sh        what building, running and testing the CPU
#                                library and the `kara` command need; changes
#                                no system-wide setting
#   tools/install_deps.sh --dev  also what CI and development use: the aarch64
#                                cross-compiler, qemu, clang and clang-format,
#                                oneDNN, and Debian's arm64 architecture (for
#                                the arm64 libyaml archive of tools/ci_arm_full.sh)
set -euo pipefail
dev=0
case "${1:-}" in
"") ;;
--dev) dev=1 ;;
-h | --help)
    sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
*)
    echo "install_deps.sh: unknown option '$1' (expected --dev)" >&2
    exit 64
    ;;
esac

# The build (compiler, CMake, libyaml) and the test suite: python3 checks
# JSON output, pkg-config builds an app against the installed library, tmux
# drives chat on a terminal, unicode-data regenerates the Unicode tables,
# time (/usr/bin/time -v) measures peak memory in test_memory_bounds.
pkgs=(cmake gcc make libyaml-dev python3 pkg-config tmux unicode-data git time)
if [ "$dev" -eq 1 ]; then
    pkgs+=(gcc-aarch64-linux-gnu qemu-user clang clang-format libdnnl-dev)
fi

sudo_cmd=""
[ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

missing=()
for p in "${pkgs[@]}"; do
    installed "$p" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}"
fi

# --dev only: the aarch64 cross build of the whole library and command links
# Debian's arm64 libyaml archive, which needs the foreign architecture.
if [ "$dev" -eq 1 ] && ! installed libyaml-dev:arm64; then
    $sudo_cmd dpkg --add-architecture arm64
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq libyaml-dev:arm64
fi
