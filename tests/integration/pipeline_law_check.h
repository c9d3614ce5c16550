// The law check of sampled requests through an in-process pipeline, shared by the
// tests of guidance and of the logits processors: each way of verifying (the target
// alone, rejection, coupled) must commit short token sequences that follow an exact
// law computed by the test, and fail a deliberately wrong one.
//
//   testing::LawCheck check{.law = law, .wrong_law = wrong, .tokens = 3, .samples = 3000,
//                           .id_prefix = "g", .label = "guided", .wrong_label = "  wrong"};
//   testing::ExpectSetupsFollowTheLaw(*pipeline->client, testing::LawCheckSetups("plain"),
//                                     check, make_submit);
#ifndef SPLITSPEC_TESTS_INTEGRATION_PIPELINE_LAW_CHECK_H_
#define SPLITSPEC_TESTS_INTEGRATION_PIPELINE_LAW_CHECK_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "proto/splitspec.pb.h"
#include "runtime/net/request_client.h"

namespace splitspec::testing {

// One way of verifying sampled requests.
struct SampledSetup {
  std::string name;  // printed with its chi-square and failures
  proto::VerifyMode mode;
  int k;                // draft_k
  std::string drafter;  // SubmitRequest.drafter: "none" is the target alone
};

// The four setups the law checks run: the target alone (named `plain_name`), rejection
// with k = 2 and k = 4, coupled with k = 2.
std::vector<SampledSetup> LawCheckSetups(const std::string& plain_name);

struct LawCheck {
  std::map<std::vector<int32_t>, double> law;        // of the first `tokens` tokens
  std::map<std::vector<int32_t>, double> wrong_law;  // a wrong law the counts must fail
  int tokens = 0;                                    // each request's max_tokens
  int samples = 0;                                   // requests per setup and draw
  std::string id_prefix;                             // request ids PREFIX<draw>-<setup>-<sample>
  std::string label;        // each chi-square is printed as "LABEL, SETUP, draw D"
  std::string wrong_label;  // the wrong law's chi-square is printed as this
};

// The request for one sample of `setup` (ExpectSetupsFollowTheLaw then sets its seed).
using SampledSubmitMaker =
    std::function<proto::SubmitRequest(const std::string& id, const SampledSetup& setup)>;

// Two-stage: each draw runs `check.samples` requests per setup (CollectTokens) with
// seeds base + 7919 ((draw * setups + setup) * samples + sample), the base random (and
// traced), and checks each setup's counts against `check.law` at 1e-3 / setups
// (Bonferroni: 1e-3 per draw); the check fails only if two independent draws both fail
// (PassesOneOfTwoDraws: 1e-6). These fail the current test directly: a request that
// does not commit `check.tokens` tokens or ends in an error, counts that pass
// `check.wrong_law` at 1e-3 (the harness could not tell), and a setup with a drafter
// whose drafts were all accepted or all rejected.
void ExpectSetupsFollowTheLaw(net::RequestClient& client, const std::vector<SampledSetup>& setups,
                              const LawCheck& check, const SampledSubmitMaker& make_submit);

}  // namespace splitspec::testing

#endif  // SPLITSPEC_TESTS_INTEGRATION_PIPELINE_LAW_CHECK_H_
