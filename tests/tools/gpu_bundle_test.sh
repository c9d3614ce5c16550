#!/usr/bin/env bash
# The GPU bundle, made and run on this machine (no GPU): tools/gpu/bundle.sh packs the build,
# the archive is unpacked in a temporary folder outside the checkout and run from there with
# only its own lib/ added to the library path:
#   - every bundled gpu test binary runs and its tests skip (no device);
#   - with SPLITSPEC_REQUIRE_GPU=1 every one of those skips is a failure naming cuda:0 and
#     CUDA's error (tests/testing/gpu_test_main.cc);
#   - the bundled writer writes a benchmark model and the bundled splitspec loads it;
#   - the bundle holds libcudart and Gloo but neither libcuda nor libnccl, and every other
#     library its binaries load resolves into its lib/;
#   - tools/gpu/device_session.sh --dry-run --bundle plans every bundled test binary, and the
#     routine run for real with stand-ins for nvidia-smi, NCCL and compute-sanitizer reports
#     every test's failure (no GPU) and a sanitizer error by kernel in summary.txt.
#   gpu_bundle_test.sh BUILD_DIR      (ctest: gpu_bundle; the build must be complete)
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="$(cd "${1:?usage: gpu_bundle_test.sh BUILD_DIR}" && pwd)"
fail() { echo "FAIL: $*" >&2; exit 1; }
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
start=$SECONDS

bash "$ROOT/tools/gpu/bundle.sh" --build-dir "$BUILD" --no-build --out "$TMP/bundle.tar.xz" \
  || fail "bundle.sh failed"
mkdir -p "$TMP/run"
tar -xJf "$TMP/bundle.tar.xz" -C "$TMP/run" || fail "the bundle does not unpack"
U="$TMP/run/splitspec-gpu"
cd "$TMP/run" || fail "cd"
[[ "$(pwd)" != "$ROOT"* ]] || fail "the temporary folder is inside the checkout"
export LD_LIBRARY_PATH="$U/lib"

for lib in libcudart.so libgloo.so libabsl_ libprotobuf.so libzmq.so; do
  ls "$U/lib" | grep -q "^$lib" || fail "the bundle's lib/ lacks $lib*: $(ls "$U/lib" | tr '\n' ' ')"
done
for lib in libcuda.so libnccl.so libc.so libstdc++.so; do
  ! ls "$U/lib" | grep -q "^$lib" || fail "the bundle's lib/ holds $lib* (it must come from the GPU machine)"
done
# Every library a bundled binary loads comes from the bundle, except glibc's, the C++ runtime,
# the driver's libcuda and NCCL (the GPU machine's own).
GLIBC='linux-vdso|ld-linux-x86-64|libc|libm|libpthread|libdl|librt|libutil|libresolv|libanl|libnsl'
for elf in "$U"/bin/* "$U"/tests/*; do
  while read -r soname path; do
    [[ "$path" == "$U/lib/"* ]] && continue
    [[ "$soname" =~ ^($GLIBC|libstdc\+\+|libgcc_s|libcuda|libnccl)\.so ]] \
      || fail "$(basename "$elf") loads $soname from $path, outside the bundle"
  done < <(ldd "$elf" | awk '$2 == "=>" {print $1, $3}')
done
mapfile -t TESTS <"$U/gpu_tests.txt"
((${#TESTS[@]} >= 10)) || fail "only ${#TESTS[@]} gpu test binaries in the bundle: ${TESTS[*]}"

for t in "${TESTS[@]}"; do
  out="$("$U/tests/$t" 2>&1)"; rc=$?
  [[ "$rc" == 0 ]] || fail "$t exited $rc without a GPU (its tests should skip):
$out"
  skipped="$(grep -c '^\[  SKIPPED \] .*([0-9]* ms)$' <<<"$out")"
  ((skipped > 0)) || fail "$t skipped nothing without a GPU:
$out"
  out="$(SPLITSPEC_REQUIRE_GPU=1 "$U/tests/$t" 2>&1)"; rc=$?
  [[ "$rc" != 0 ]] || fail "$t passed with SPLITSPEC_REQUIRE_GPU=1 and no GPU:
$out"
  failed="$(grep -c '^\[  FAILED  \] .*([0-9]* ms)$' <<<"$out")"
  [[ "$failed" == "$skipped" ]] || fail "$t: $skipped tests skip, but $failed failed with SPLITSPEC_REQUIRE_GPU=1:
$out"
  grep -q 'SPLITSPEC_REQUIRE_GPU=1: a gpu test may not skip' <<<"$out" || fail "$t: no REQUIRE_GPU message:
$out"
  grep -qE 'cuda:0 unusable: cudaGetDeviceCount: cudaError[A-Za-z]+: ' <<<"$out" \
    || fail "$t does not name cuda:0 and CUDA's error:
$out"
  echo "$t: $skipped tests skip; with SPLITSPEC_REQUIRE_GPU=1 all $failed fail naming cuda:0"
done
grep -m1 -oE 'cuda:0 unusable: [^"]*$' <<<"$out"

# The bundled writer and splitspec, from the unpacked folder: one llama3-1b layer, 512 rows.
"$U/bin/splitspec_write_bench_model" --shape llama3-1b --type q4_0 --layers 1 --vocab-rows 512 \
  --out "$TMP/bench.gguf" || fail "the bundled splitspec_write_bench_model failed"
logits="$("$U/bin/splitspec" logits --model "$TMP/bench.gguf" --prompt-ids 1,2,3 --threads 1)" \
  || fail "the bundled splitspec does not load the bench model: $logits"
values="$(grep -o ',' <<<"$logits" | wc -l)"
[[ "$logits" == '{"logits":['* && "$values" == 511 ]] || fail "splitspec logits: $((values + 1)) values, not 512"

plan="$(bash "$ROOT/tools/gpu/device_session.sh" --dry-run --bundle "$TMP/bundle.tar.xz")" \
  || fail "device_session.sh --dry-run --bundle exited $?"
for t in "${TESTS[@]}"; do
  [[ "$plan" == *"SPLITSPEC_REQUIRE_GPU=1 /tmp/splitspec-gpu/splitspec-gpu/tests/$t "* ]] \
    || fail "the dry run does not plan $t"
  [[ "$plan" == *"--tool memcheck --target-processes all"*"/tests/$t "* ]] \
    || fail "the dry run plans no memcheck of $t"
done
[[ "$plan" == *"=== done (dry run)"* ]] || fail "the dry run did not finish"

# The routine itself (not a dry run) on this bundle, with stand-ins for what only a GPU machine
# has: nvidia-smi, NCCL's wheel (a python package nvidia.nccl whose lib/ holds this machine's
# libnccl) and compute-sanitizer (it runs the test and, for cuda_transformer_test's memcheck,
# reports an error in a kernel the way the real tool does). With no GPU every test fails
# naming cuda:0; the summary must say so per binary, name the kernel, tell NCCL's own API error
# (expected) from ours, and end in FAIL.
nccl_lib="$(ldd "$U/tests/nccl_communicator_test" | awk '$1 ~ /^libnccl/ {print $3}')"
mkdir -p "$TMP/standin/bin" "$TMP/standin/py/nvidia/nccl/lib"
[[ -z "$nccl_lib" ]] || ln -s "$nccl_lib" "$TMP/standin/py/nvidia/nccl/lib/libnccl.so.2"
printf '#!/bin/sh\necho "Stand-in GPU, 1 MiB, 0.0"\n' >"$TMP/standin/bin/nvidia-smi"
cat >"$TMP/standin/bin/compute-sanitizer" <<'STANDIN'
#!/usr/bin/env bash
tool=""
while [[ "$1" == --* ]]; do [[ "$1" == --tool ]] && tool="$2"; shift 2; done
"$@"; rc=$?
if [[ "$tool" == memcheck && "$1" == */cuda_transformer_test ]]; then
  echo "========= Invalid __shared__ read of size 12 bytes"
  echo "=========     at AttentionKernel(const float *, int)+0x3090 in transformer_kernels.cu:80"
  echo "========= ERROR SUMMARY: 1 error"
  exit 86
fi
if [[ "$tool" == memcheck && "$1" == */cuda_tp_test ]]; then
  # NCCL probing its kernel images: an API error the routine names as expected, not ours.
  echo "========= Program hit cudaErrorNoKernelImageForDevice (error 209) due to \"no kernel image\" on CUDA API call to cudaFuncGetAttributes."
  echo "=========     Saved host backtrace up to driver entry point at error"
  echo "=========         Host Frame: ncclInitKernelsForDevice(int, int, unsigned long*) in enqueue.cc:52 [0x6d9d3] in libnccl.so.2"
  echo "========= ERROR SUMMARY: 1 error"
  exit 86
fi
echo "========= ERROR SUMMARY: 0 errors"
exit $rc
STANDIN
chmod +x "$TMP/standin/bin/"*
routine_out="$TMP/routine-out"
PATH="$TMP/standin/bin:$PATH" PYTHONPATH="$TMP/standin/py" OUT="$routine_out" \
  SPLITSPEC_GPU_WORK="$TMP/routine-work" bash "$ROOT/tools/gpu/device_session.sh" \
  --bundle "$TMP/bundle.tar.xz" test sanitize >"$TMP/routine.log" 2>&1
rc=$?
summary="$(cat "$routine_out/summary.txt")"
[[ "$rc" == 1 ]] || fail "the routine exited $rc without a GPU, not 1:
$summary"
expect() { [[ "$summary" == *"$1"* ]] || fail "summary.txt lacks '$1':
$summary"; }
expect "=== not run (they need two GPUs; this machine has 1): NcclCommunicatorTest.TwoRanksAllReduceAllGatherAndBroadcast"
expect "FAILED: test softmax_cuda_test: exit 1; passed 1; failed: 1: SoftmaxCudaTest.MatchesCpuReference"
expect "FAILED: memcheck cuda_transformer_test: 1 errors in AttentionKernel in "
expect "memcheck cuda_tp_test: exit 86 with 0 sanitizer errors of ours"
expect "(1 expected: API cudaFuncGetAttributes (cudaErrorNoKernelImageForDevice) by NCCL x1)"
expect "FAILED: memcheck softmax_cuda_test: exit 1 with 0 sanitizer errors"
expect "racecheck softmax_cuda_test"
expect "=== RESULT: FAIL"
for t in "${TESTS[@]}"; do expect "test $t: "; expect "initcheck $t: "; done
tar -xJOf "$routine_out/logs.tar.xz" logs/test_softmax_cuda_test.log | grep -q "cuda:0 unusable" \
  || fail "logs.tar.xz lacks the test log naming cuda:0"
[[ "$(ls "$routine_out")" == "$(printf 'logs.tar.xz\nsummary.txt')" ]] \
  || fail "the routine left more than summary.txt and logs.tar.xz in \$OUT: $(ls "$routine_out")"
echo "PASS: bundle $(($(stat -c %s "$TMP/bundle.tar.xz") / 1024)) KiB, ${#TESTS[@]} test binaries, $((SECONDS - start)) s"
