// TargetEngine's device-verification bookkeeping (UseDeviceRows), checked on the
// CPU: a DeviceRows that keeps its rows in host memory and verifies with
// spec::VerifyOnHost (the CPU executor of the device plan) stands in for the CUDA
// store, so what is tested here is the engine's side: which rows it names, the
// pending p kept in a request's slot across steps, the guided combination
// handed to LoadStep, slots freed on release. The engine over it must commit
// exactly what the host-verifying engine commits (greedy, guided greedy,
// seeded rejection sampling). tests/gpu/device_verify_engine_test.cc runs the
// same traffic with the CUDA store and a CUDA model.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/guidance.h"
#include "target_worker/target_engine.h"
#include "tests/unit/target_worker/engine_driver.h"
#include "tests/unit/target_worker/fake_language_model.h"

namespace splitspec::target {
namespace {

using testing::FakeLanguageModel;

// The fake model, allowed to "keep" its logits (they stay in ForwardOutput::logits,
// which HostDeviceRows reads).
class KeepingFakeModel : public FakeLanguageModel {
 public:
  absl::Status KeepLogitsOnDevice(bool keep) override {
    kept_ = keep;
    return absl::OkStatus();
  }
  bool kept() const { return kept_; }

 private:
  bool kept_ = false;
};

// DeviceRows over host memory (test double of the CUDA store).
class HostDeviceRows final : public DeviceRows {
 public:
  HostDeviceRows(int vocab, int slots) : vocab_(vocab), slots_(slots), rows_(slots * vocab) {}

  int slots() const override { return slots_; }
  int64_t StepRow(int64_t r) const override { return slots_ + r; }
  int64_t SlotRow(int s) const override { return s; }

  absl::Status LoadStep(const model::ForwardOutput& out,
                        absl::Span<const GuidedRows> guided) override {
    if (!out.logits.empty() && out.device_logits != nullptr) {
      return absl::InternalError("both host and device logits set");
    }
    rows_.resize(static_cast<size_t>(slots_) * vocab_);
    rows_.insert(rows_.end(), out.logits.begin(), out.logits.end());
    for (const GuidedRows& g : guided) {
      std::vector<float> scales(g.rows, g.scale);
      float* cond = Row(StepRow(g.cond_row));
      kernels::GuidedLogitsRows(cond, Row(StepRow(g.uncond_row)), scales.data(), cond,
                                static_cast<int>(g.rows), vocab_);
      ++guided_spans_;
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<absl::StatusOr<spec::VerifyOutcome>>> Verify(
      absl::Span<const spec::DeviceVerifyRequest> requests) override {
    ++verify_calls_;
    return spec::VerifyOnHost(requests, rows_, vocab_, vocab_);
  }

  void Keep(int64_t row, int slot) override {
    if (row == SlotRow(slot)) return;
    std::copy(Row(row), Row(row) + vocab_, Row(SlotRow(slot)));
    ++kept_rows_;
  }
  absl::Status EndStep() override { return absl::OkStatus(); }

  int verify_calls() const { return verify_calls_; }
  int kept_rows() const { return kept_rows_; }
  int guided_spans() const { return guided_spans_; }

 private:
  float* Row(int64_t row) { return rows_.data() + static_cast<size_t>(row) * vocab_; }
  int vocab_;
  int slots_;
  std::vector<float> rows_;
  int verify_calls_ = 0, kept_rows_ = 0, guided_spans_ = 0;
};

proto::Assignment Assign(const std::string& id, const std::vector<int32_t>& prompt, int max_tokens,
                         proto::VerifyMode mode, float scale = 1.0f) {
  proto::Assignment a;
  a.set_request_id(id);
  a.mutable_committed_tokens()->Assign(prompt.begin(), prompt.end());
  a.set_prompt_length(static_cast<uint32_t>(prompt.size()));
  a.set_draft_worker_id(7);
  a.mutable_params()->set_max_tokens(static_cast<uint32_t>(max_tokens));
  if (mode == proto::VERIFY_MODE_REJECTION) {
    a.mutable_params()->set_temperature(1.0f);
    a.mutable_params()->set_seed(1234 + prompt.size());
  } else {
    a.mutable_params()->set_temperature(0.0f);
  }
  if (scale != 1.0f) {
    a.mutable_params()->set_guidance_scale(scale);
    a.mutable_params()->add_negative_prompt_tokens(0);
    a.mutable_params()->add_negative_prompt_tokens(5);
  }
  a.set_verify_mode(mode);
  return a;
}

std::vector<proto::Assignment> Traffic() {
  return {Assign("greedy", {1, 2, 3}, 20, proto::VERIFY_MODE_GREEDY),
          Assign("long", {30, 1, 17, 4, 4, 9, 2, 8, 8, 1}, 16, proto::VERIFY_MODE_GREEDY),
          Assign("guided", {8, 3}, 20, proto::VERIFY_MODE_GREEDY, 0.5f),
          Assign("sampled", {9, 9}, 24, proto::VERIFY_MODE_REJECTION),
          Assign("guided-sampled", {4}, 12, proto::VERIFY_MODE_REJECTION, 1.5f)};
}

std::map<std::string, std::vector<int32_t>> Oracles() {
  std::map<std::string, std::vector<int32_t>> oracles;
  for (const proto::Assignment& a : Traffic()) {
    oracles[a.request_id()] = FakeLanguageModel::GreedyExtend(
        {a.committed_tokens().begin(), a.committed_tokens().end()}, 40);
  }
  return oracles;
}

TargetEngineOptions Options() {
  TargetEngineOptions options;
  options.step_token_budget = 12;
  options.prefill_chunk = 4;
  options.max_requests = 8;
  options.block_wait = absl::Hours(1);
  options.feed_wait = absl::ZeroDuration();
  return options;
}

TEST(DeviceRowsEngineTest, CommitsExactlyWhatHostVerificationCommits) {
  KeepingFakeModel host_model;
  TargetEngine host(&host_model, Options());
  const auto want = testing::DriveEngine(host, Traffic(), Oracles(), FakeLanguageModel::kVocab);

  KeepingFakeModel device_model;
  TargetEngine device(&device_model, Options());
  auto rows = std::make_unique<HostDeviceRows>(FakeLanguageModel::kVocab, 8);
  HostDeviceRows* store = rows.get();
  ASSERT_TRUE(device.UseDeviceRows(std::move(rows)).ok());
  EXPECT_TRUE(device_model.kept());
  EXPECT_TRUE(device.verifies_on_device());
  const auto got = testing::DriveEngine(device, Traffic(), Oracles(), FakeLanguageModel::kVocab);

  EXPECT_EQ(got, want);
  for (const proto::Assignment& a : Traffic()) {
    EXPECT_EQ(got.at(a.request_id()).size(),
              static_cast<size_t>(a.committed_tokens_size()) + a.params().max_tokens())
        << a.request_id();
  }
  // Every path was taken: verification, pending rows kept across steps, guidance.
  EXPECT_GT(store->verify_calls(), 10);
  EXPECT_GT(store->kept_rows(), 0);
  EXPECT_GT(store->guided_spans(), 0);
  EXPECT_EQ(device.counters().malformed_blocks, host.counters().malformed_blocks);
}

TEST(DeviceRowsEngineTest, SlotsAreReusedAfterRequestsFinish) {
  KeepingFakeModel model;
  TargetEngineOptions options = Options();
  options.max_requests = 2;
  TargetEngine engine(&model, options);
  ASSERT_TRUE(
      engine.UseDeviceRows(std::make_unique<HostDeviceRows>(FakeLanguageModel::kVocab, 2)).ok());
  // Three rounds of two requests: a slot that was not freed would run out.
  for (int round = 0; round < 3; ++round) {
    std::vector<proto::Assignment> traffic = {
        Assign("a" + std::to_string(round), {1, 2}, 6, proto::VERIFY_MODE_GREEDY),
        Assign("b" + std::to_string(round), {3}, 6, proto::VERIFY_MODE_GREEDY)};
    std::map<std::string, std::vector<int32_t>> oracles;
    for (const auto& a : traffic) {
      oracles[a.request_id()] = FakeLanguageModel::GreedyExtend(
          {a.committed_tokens().begin(), a.committed_tokens().end()}, 20);
    }
    const auto got = testing::DriveEngine(engine, traffic, oracles, FakeLanguageModel::kVocab);
    for (const auto& a : traffic) {
      EXPECT_EQ(got.at(a.request_id()), std::vector<int32_t>(oracles[a.request_id()].begin(),
                                                             oracles[a.request_id()].begin() +
                                                                 a.committed_tokens_size() + 6));
    }
  }
}

// The device verifier has no context processors (runtime/spec/logits_pipeline.h):
// a request that uses them is refused by name, never served unprocessed; the
// same request without them is taken.
TEST(DeviceRowsEngineTest, ARequestWithPenaltiesOrLogitBiasIsRefusedByName) {
  KeepingFakeModel model;
  TargetEngine engine(&model, Options());
  ASSERT_TRUE(
      engine.UseDeviceRows(std::make_unique<HostDeviceRows>(FakeLanguageModel::kVocab, 8)).ok());
  proto::Assignment penalized = Assign("penalized", {1, 2}, 6, proto::VERIFY_MODE_GREEDY);
  penalized.mutable_params()->mutable_processors()->set_frequency_penalty(0.5f);
  const absl::Status status = engine.AddRequest(penalized);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_NE(status.message().find("frequency_penalty"), std::string::npos) << status;
  EXPECT_NE(status.message().find("not applied by the CUDA verifier"), std::string::npos)
      << status;
  proto::Assignment biased = Assign("biased", {1, 2}, 6, proto::VERIFY_MODE_GREEDY);
  (*biased.mutable_params()->mutable_processors()->mutable_logit_bias())[1] = 2.0f;
  EXPECT_TRUE(absl::IsInvalidArgument(engine.AddRequest(biased)));
  EXPECT_TRUE(engine.AddRequest(Assign("plain", {1, 2}, 6, proto::VERIFY_MODE_GREEDY)).ok());
}

// Nor does it apply a grammar mask: a structured-output request is refused by
// name (before any grammar is compiled: this engine has no compiler at all).
TEST(DeviceRowsEngineTest, AStructuredOutputRequestIsRefusedByName) {
  KeepingFakeModel model;
  TargetEngine engine(&model, Options());
  ASSERT_TRUE(
      engine.UseDeviceRows(std::make_unique<HostDeviceRows>(FakeLanguageModel::kVocab, 8)).ok());
  proto::Assignment constrained = Assign("json", {1, 2}, 6, proto::VERIFY_MODE_GREEDY);
  constrained.mutable_params()->mutable_processors()->mutable_grammar()->set_kind("json_object");
  const absl::Status status = engine.AddRequest(constrained);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_NE(status.message().find("structured outputs (json_object) are not applied by the CUDA "
                                  "verifier"),
            std::string::npos)
      << status;
  EXPECT_TRUE(engine.AddRequest(Assign("plain", {1, 2}, 6, proto::VERIFY_MODE_GREEDY)).ok());
}

// Its rows stay on the device: a request for log probabilities is refused by
// name, never answered without them.
TEST(DeviceRowsEngineTest, ALogprobsRequestIsRefusedByName) {
  KeepingFakeModel model;
  TargetEngine engine(&model, Options());
  ASSERT_TRUE(
      engine.UseDeviceRows(std::make_unique<HostDeviceRows>(FakeLanguageModel::kVocab, 8)).ok());
  proto::Assignment asking = Assign("logprobs", {1, 2}, 6, proto::VERIFY_MODE_GREEDY);
  asking.mutable_params()->set_logprobs(0);
  const absl::Status status = engine.AddRequest(asking);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_NE(status.message().find("logprobs are not returned by the CUDA verifier"),
            std::string::npos)
      << status;
  EXPECT_TRUE(engine.AddRequest(Assign("plain", {1, 2}, 6, proto::VERIFY_MODE_GREEDY)).ok());
}

TEST(DeviceRowsEngineTest, RefusesAStoreWithFewerSlotsThanRequests) {
  KeepingFakeModel model;
  TargetEngine engine(&model, Options());  // max_requests 8
  const absl::Status status =
      engine.UseDeviceRows(std::make_unique<HostDeviceRows>(FakeLanguageModel::kVocab, 4));
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_NE(status.message().find("4 slots for max_requests 8"), std::string::npos) << status;
  EXPECT_FALSE(engine.verifies_on_device());
  EXPECT_FALSE(model.kept());
}

TEST(DeviceRowsEngineTest, AModelThatCannotKeepItsLogitsOnADeviceIsRefused) {
  FakeLanguageModel model;  // the LanguageModel default: logits on the host only
  TargetEngine engine(&model, Options());
  const absl::Status status =
      engine.UseDeviceRows(std::make_unique<HostDeviceRows>(FakeLanguageModel::kVocab, 8));
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_FALSE(engine.verifies_on_device());
}

}  // namespace
}  // namespace splitspec::target
