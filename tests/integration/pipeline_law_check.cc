#include "tests/integration/pipeline_law_check.h"

#include <random>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/integration/in_process_pipeline.h"
#include "tests/testing/chi_square.h"

namespace splitspec::testing {

std::vector<SampledSetup> LawCheckSetups(const std::string& plain_name) {
  return {{plain_name, proto::VERIFY_MODE_REJECTION, 1, "none"},
          {"rejection k=2", proto::VERIFY_MODE_REJECTION, 2, ""},
          {"rejection k=4", proto::VERIFY_MODE_REJECTION, 4, ""},
          {"coupled k=2", proto::VERIFY_MODE_COUPLED, 2, ""}};
}

void ExpectSetupsFollowTheLaw(net::RequestClient& client, const std::vector<SampledSetup>& setups,
                              const LawCheck& check, const SampledSubmitMaker& make_submit) {
  const uint64_t base_seed = (static_cast<uint64_t>(std::random_device{}()) << 32) | 1u;
  SCOPED_TRACE(absl::StrCat("base seed ", base_seed));
  const auto draw = [&](int d) {
    bool passed = true;
    for (size_t s = 0; s < setups.size(); ++s) {
      std::vector<proto::SubmitRequest> submits;
      for (int i = 0; i < check.samples; ++i) {
        const uint64_t seed = base_seed + 7919ull * ((d * setups.size() + s) * check.samples + i);
        submits.push_back(make_submit(absl::StrCat(check.id_prefix, d, "-", s, "-", i), setups[s]));
        submits.back().mutable_params()->set_seed(seed);
      }
      std::map<std::vector<int32_t>, int64_t> seen;
      proto::SpecStats stats;
      for (const std::vector<int32_t>& tokens : CollectTokens(client, submits, &stats)) {
        EXPECT_EQ(tokens.size(), static_cast<size_t>(check.tokens));
        ++seen[tokens];
      }
      const auto result = spec::testing::ChiSquareTestAgainstLaw(check.law, seen);
      spec::testing::PrintChiSquare(absl::StrCat(check.label, ", ", setups[s].name, ", draw ", d),
                                    result);
      passed &= result.p_value > 1e-3 / setups.size();
      const auto wrong = spec::testing::ChiSquareTestAgainstLaw(check.wrong_law, seen);
      spec::testing::PrintChiSquare(check.wrong_label, wrong);
      EXPECT_LT(wrong.p_value, 1e-3) << setups[s].name << ": the harness cannot tell";
      if (setups[s].drafter != "none") {  // speculation really ran, both ways
        EXPECT_GT(stats.accepted(), 0u) << setups[s].name;
        EXPECT_LT(stats.accepted(), stats.verified()) << setups[s].name;
      }
    }
    return passed;
  };
  EXPECT_TRUE(spec::testing::PassesOneOfTwoDraws(draw));
}

}  // namespace splitspec::testing
