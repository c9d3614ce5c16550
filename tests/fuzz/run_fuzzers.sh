#!/usr/bin/env bash
# Builds the libFuzzer targets (CMake preset "fuzz": clang 14, ASan + UBSan) and
# runs each for a bounded time from its committed corpus, tests/fuzz/corpus/<target>/.
#
#   tests/fuzz/run_fuzzers.sh                 # every target, 45 s each
#   tests/fuzz/run_fuzzers.sh 300 http_parser # one target, 5 minutes
#   SPLITSPEC_FUZZ_SECONDS=60 tests/fuzz/run_fuzzers.sh
#
# New inputs go to a scratch folder, never into the committed corpus. A crash, a
# memory error, a failed property (FUZZ_CHECK), a 10 s hang or 2 GiB of memory
# on one input stops that target: its input is kept as
# build/fuzz/artifacts/<target>-crash-<sha1> and the script exits 1 after
# running the others. Commit such an input as tests/fuzz/corpus/<target>/regress-<what>
# with the fix (the gcc build's fuzz_corpus_<target> test replays it).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

seconds="${1:-${SPLITSPEC_FUZZ_SECONDS:-45}}"
shift || true
targets=("$@")
if ((${#targets[@]} == 0)); then
  targets=(http_parser openai_request toml_parser wire_message)
fi

cmake --preset fuzz >/dev/null || exit 1
cmake --build --preset fuzz -j "$(nproc)" || exit 1

# Readable stacks in crash reports (llvm-14's symbolizer; deploy/setup.sh installs it).
if [[ -z "${ASAN_SYMBOLIZER_PATH:-}" && -x /usr/bin/llvm-symbolizer-14 ]]; then
  export ASAN_SYMBOLIZER_PATH=/usr/bin/llvm-symbolizer-14
fi
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"

artifacts="build/fuzz/artifacts"
mkdir -p "$artifacts"
failed=()
for target in "${targets[@]}"; do
  scratch="$(mktemp -d)"
  echo "==> fuzzing ${target} for ${seconds}s"
  # -timeout: one input taking 10 s is a hang; -rss_limit_mb: a blow-up.
  # (progress lines, one per new input, and the recommended dictionary are left
  # out of the log)
  build/fuzz/bin/"${target}"_fuzzer -max_total_time="${seconds}" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="${artifacts}/${target}-" \
    "$scratch" "tests/fuzz/corpus/${target}" 2>&1 |
    awk '/^#[0-9]/ || /^\tNEW_FUNC/ { next } /Recommended dictionary/ { skip = 1 } !skip { print }
         /End of recommended dictionary/ { skip = 0 }'
  if ((PIPESTATUS[0] != 0)); then failed+=("$target"); fi
  rm -rf "$scratch"
done
if ((${#failed[@]})); then
  echo "==> fuzzing FAILED for: ${failed[*]} (inputs in ${artifacts}/)" >&2
  exit 1
fi
echo "==> fuzzing: ${#targets[@]} targets, ${seconds}s each, no failure"
