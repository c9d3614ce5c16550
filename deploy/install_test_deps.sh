#!/usr/bin/env bash
# Installs the Debian packages the deploy tests (tests/deploy, ctest -L deploy)
# need and users do not: a real sshd for the ssh launcher's hosts, and a
# one-node Slurm (slurmctld, slurmd, munge) for the batch script. deploy/setup.sh
# does not install them; .ci/run calls this before its test phase, and a deploy
# test calls it when a package is missing. Idempotent; needs root (or sudo).
# The daemons are not started (Debian's policy-rc.d, where present, forbids
# it; the tests start their own with throw-away configs).
set -euo pipefail

PACKAGES=(openssh-server openssh-client slurm-wlm munge util-linux iproute2 procps)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "==> deploy test packages: all present (${PACKAGES[*]})"
  exit 0
fi
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
echo "==> deploy test packages: installing ${missing[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
