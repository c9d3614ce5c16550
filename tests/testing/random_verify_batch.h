// Random device-verification batches (runtime/spec/device_verify_plan.h) for the
// CPU plan tests and the CUDA verifier's parity tests: a logits matrix whose rows
// the requests name in shuffled order, every mode, sampling parameters across
// temperature 0 / top-k / top-p / min-p, ragged k (0 included), and draft tokens
// that the target often accepts (its own choice, or a sample of a q close to p).
//
// Logits are multiples of 1/8 in [-4, 4) with a few -inf: many exact ties (the
// lower id must win everywhere) and no two distinct probabilities within round-off
// of each other, so a device's probabilities cut the same support as the CPU's.
#ifndef SPLITSPEC_TESTS_TESTING_RANDOM_VERIFY_BATCH_H_
#define SPLITSPEC_TESTS_TESTING_RANDOM_VERIFY_BATCH_H_

#include <cstdint>
#include <vector>

#include "runtime/spec/device_verify_plan.h"
#include "runtime/spec/verify.h"

namespace splitspec::testing {

struct RandomVerifyBatch {
  int32_t vocab = 0;
  int64_t row_stride = 0;      // vocab plus padding, so strided reads are exercised
  int64_t num_logit_rows = 0;  // more than the requests read
  std::vector<float> logits;   // [num_logit_rows, row_stride]
  std::vector<spec::DeviceVerifyRequest> requests;  // spans into the vectors below
  std::vector<std::vector<int64_t>> rows;
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::vector<spec::SparseDistribution>> q;
};

// REQUIRES vocab >= 2, num_requests >= 0. Deterministic in `seed`.
RandomVerifyBatch MakeRandomVerifyBatch(int32_t vocab, int num_requests, uint64_t seed);

// The same requests with their target rows made on the host by LogitsToProbs,
// for runtime/spec/verify.h's VerifyBatch: the independent reference.
// probs_storage receives the rows the returned requests point into.
std::vector<spec::VerifyRequest> HostVerifyRequests(const RandomVerifyBatch& batch,
                                                    std::vector<std::vector<float>>* probs_storage);

}  // namespace splitspec::testing

#endif  // SPLITSPEC_TESTS_TESTING_RANDOM_VERIFY_BATCH_H_
