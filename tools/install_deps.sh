#!/usr/bin/env bash
# Install the Debian packages Kara builds and tests with (as root, or with
# sudo). Safe to run again: packages already present are skipped.
set -euo pipefail
pkgs=(cmake gcc make pkg-config libyaml-dev libdnnl-dev gcc-aarch64-linux-gnu qemu-user unicode-data tmux clang-format clang time)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    sudo_cmd=""
    [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}"
fi
# The aarch64 cross build of the whole library and command (tools/ci_arm_full.sh)
# links Debian's arm64 libyaml archive: add the architecture once.
if ! dpkg-query -W -f='${Status}' libyaml-dev:arm64 2>/dev/null | grep -q "install ok installed"; then
    sudo_cmd=""
    [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
    $sudo_cmd dpkg --add-architecture arm64
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq libyaml-dev:arm64
fi
