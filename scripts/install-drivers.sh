#!/usr/bin/env bash
# Install Mesa's software Vulkan (lavapipe) and GL (llvmpipe, through EGL)
# drivers when they are missing. Debian/Ubuntu, as root. Idempotent.
set -euo pipefail
need=()
[ -e /usr/share/vulkan/icd.d/lvp_icd.x86_64.json ] || ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1 || need+=(mesa-vulkan-drivers)
ldconfig -p | grep -q 'libvulkan.so.1' || need+=(libvulkan1)
ldconfig -p | grep -q 'libEGL.so.1' || need+=(libegl1)
ldconfig -p | grep -q 'libEGL_mesa.so.0' || need+=(libegl-mesa0)
ls /usr/lib/*/dri/swrast_dri.so >/dev/null 2>&1 || need+=(libgl1-mesa-dri)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
