// TargetEngine's device-verification bookkeeping (UseDeviceRows), checked on the
// CPU: a DeviceRows that keeps its rows in host memory and verifies with
// spec::VerifyOnHost (the CPU executor of the device plan) stands in for the CUDA
// store, so what is tested here is the engine's side: which rows it names, the
// pending p kept in a request's slot across steps, the guided combination
// handed to LoadStep, slots freed on release, the rows of the requests the
// device does not serve (context processors, a grammar, logprobs) brought to
// the host for the host pipeline. The engine over it must commit exactly what
// the host-verifying engine commits (greedy, guided greedy, seeded rejection
// sampling, each processor; logprobs equal). tests/gpu/device_verify_engine_test.cc
// runs the same traffic with the CUDA store and a CUDA model.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/guidance.h"
#include "runtime/base/status_macros.h"
#include "runtime/grammar/grammar_compiler.h"
#include "runtime/grammar/grammar_spec.h"
#include "runtime/net/spec_proto.h"
#include "target_worker/target_engine.h"
#include "tests/unit/target_worker/engine_driver.h"
#include "tests/unit/target_worker/fake_language_model.h"
#include "tests/unit/target_worker/json_tokenizer.h"

namespace splitspec::target {
namespace {

using testing::FakeLanguageModel;

// The fake model, allowed to "keep" its logits: kept, they move out of
// ForwardOutput::logits (left empty, as a CUDA model leaves it) into a buffer
// of its own that ForwardOutput::device_logits points at and HostDeviceRows reads.
class KeepingFakeModel : public FakeLanguageModel {
 public:
  absl::Status KeepLogitsOnDevice(bool keep) override {
    kept_ = keep;
    return absl::OkStatus();
  }
  bool kept() const { return kept_; }

  absl::Status Forward(absl::Span<const model::SequenceInput> batch,
                       model::ForwardOutput* out) override {
    RETURN_IF_ERROR(FakeLanguageModel::Forward(batch, out));
    if (kept_) {
      kept_logits_ = std::move(out->logits);
      out->logits.clear();
      out->device_logits = kept_logits_.data();
      out->device_part_vocab = kVocab;
    }
    return absl::OkStatus();
  }

 private:
  bool kept_ = false;
  std::vector<float> kept_logits_;  // the "device" rows of the last forward
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
    if (!out.logits.empty()) return absl::InternalError("host logits from a keeping model");
    int64_t rows = 0;
    for (int n : out.num_rows) rows += n;
    rows_.resize(static_cast<size_t>(slots_) * vocab_);
    if (rows == 0) return absl::OkStatus();
    if (out.device_logits == nullptr) return absl::InvalidArgumentError("no device logits");
    rows_.insert(rows_.end(), out.device_logits, out.device_logits + rows * vocab_);
    for (const GuidedRows& g : guided) {
      std::vector<float> scales(g.rows, g.scale);
      float* cond = Row(StepRow(g.cond_row));
      kernels::GuidedLogitsRows(cond, Row(StepRow(g.uncond_row)), scales.data(), cond,
                                static_cast<int>(g.rows), vocab_);
      ++guided_spans_;
    }
    return absl::OkStatus();
  }

  absl::Status CopyRowsToHost(int64_t row, int64_t count, absl::Span<float> host) override {
    if (row < 0 || count < 0 || static_cast<size_t>(row + count) * vocab_ > rows_.size() ||
        host.size() != static_cast<size_t>(count) * vocab_) {
      return absl::InvalidArgumentError("CopyRowsToHost outside the store");
    }
    std::copy(Row(row), Row(row) + count * vocab_, host.begin());
    copied_rows_ += static_cast<int>(count);
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<absl::StatusOr<spec::VerifyOutcome>>> Verify(
      absl::Span<const spec::DeviceVerifyRequest> requests) override {
    ++verify_calls_;
    for (const spec::DeviceVerifyRequest& r : requests) {
      if (r.params.has_context_processors() || r.params.grammar.has_value() ||
          r.params.logprobs.has_value()) {
        ++verified_needing_host_;
      }
    }
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
  int copied_rows() const { return copied_rows_; }
  // Requests verified here that only the host pipeline serves (must stay 0).
  int verified_needing_host() const { return verified_needing_host_; }

 private:
  float* Row(int64_t row) { return rows_.data() + static_cast<size_t>(row) * vocab_; }
  int vocab_;
  int slots_;
  std::vector<float> rows_;
  int verify_calls_ = 0, kept_rows_ = 0, guided_spans_ = 0, copied_rows_ = 0;
  int verified_needing_host_ = 0;
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

// Requests the CUDA verifier does not serve take the host pipeline on a
// device-verifying engine (device_rows.h): penalties, logit_bias, a grammar,
// logprobs (guided and sampled ones too), mixed in the same steps with plain
// requests that stay on the device. Each commits exactly what a host target
// commits, with the same logprobs; none of them reaches the device verifier.
std::vector<proto::Assignment> MixedTraffic() {
  std::vector<proto::Assignment> traffic = {
      Assign("greedy", {1, 2, 3}, 20, proto::VERIFY_MODE_GREEDY),
      Assign("sampled", {9, 9}, 24, proto::VERIFY_MODE_REJECTION),
      Assign("guided", {8, 3}, 20, proto::VERIFY_MODE_GREEDY, 0.5f)};
  proto::Assignment penalized = Assign("penalized", {1, 2, 3}, 20, proto::VERIFY_MODE_GREEDY);
  penalized.mutable_params()->mutable_processors()->set_frequency_penalty(2.0f);
  penalized.mutable_params()->mutable_processors()->set_presence_penalty(1.0f);
  penalized.mutable_params()->mutable_processors()->set_repetition_penalty(1.5f);
  traffic.push_back(penalized);
  proto::Assignment biased = Assign("biased-sampled", {9, 9}, 24, proto::VERIFY_MODE_REJECTION);
  (*biased.mutable_params()->mutable_processors()->mutable_logit_bias())[5] = 2.5f;
  (*biased.mutable_params()->mutable_processors()->mutable_logit_bias())[11] = -100.0f;
  traffic.push_back(biased);
  proto::Assignment json = Assign("json", {4, 4}, 16, proto::VERIFY_MODE_GREEDY);
  json.mutable_params()->add_stop_token_ids(testing::kJsonTokenizerEos);
  net::GrammarToProto(grammar::GrammarSpec::Choice({"true", "abc", "[1,2]", "null"}),
                      json.mutable_params()->mutable_processors()->mutable_grammar());
  traffic.push_back(json);
  proto::Assignment logprobs = Assign("logprobs", {30, 1, 17}, 16, proto::VERIFY_MODE_GREEDY);
  logprobs.mutable_params()->set_logprobs(3);
  traffic.push_back(logprobs);
  proto::Assignment guided_logprobs =
      Assign("guided-sampled-logprobs", {4}, 12, proto::VERIFY_MODE_REJECTION, 1.5f);
  guided_logprobs.mutable_params()->set_logprobs(2);
  guided_logprobs.mutable_params()->set_logprobs_mode(proto::LOGPROBS_MODE_PROCESSED);
  traffic.push_back(guided_logprobs);
  return traffic;
}

TEST(DeviceRowsEngineTest, HostPipelineRequestsCommitWhatAHostTargetCommits) {
  auto compiler = grammar::GrammarCompiler::Create(testing::JsonTokenizer());
  ASSERT_TRUE(compiler.ok()) << compiler.status();
  TargetEngineOptions options = Options();
  options.grammar_compiler = *std::move(compiler);
  std::map<std::string, std::vector<int32_t>> oracles;
  for (const proto::Assignment& a : MixedTraffic()) {
    oracles[a.request_id()] = FakeLanguageModel::GreedyExtend(
        {a.committed_tokens().begin(), a.committed_tokens().end()}, 40);
  }

  KeepingFakeModel host_model;
  TargetEngine host(&host_model, options);
  std::map<std::string, proto::VerifyResult> want_finals;
  const auto want = testing::DriveEngine(host, MixedTraffic(), oracles, FakeLanguageModel::kVocab,
                                         2000, &want_finals);

  KeepingFakeModel device_model;
  TargetEngine device(&device_model, options);
  auto rows = std::make_unique<HostDeviceRows>(FakeLanguageModel::kVocab, 8);
  HostDeviceRows* store = rows.get();
  ASSERT_TRUE(device.UseDeviceRows(std::move(rows)).ok());
  std::map<std::string, proto::VerifyResult> got_finals;
  const auto got = testing::DriveEngine(device, MixedTraffic(), oracles,
                                        FakeLanguageModel::kVocab, 2000, &got_finals);

  EXPECT_EQ(got, want);
  // The processors did change what was committed (so the equality above tests them).
  EXPECT_NE(want.at("penalized"), std::vector<int32_t>(oracles.at("penalized").begin(),
                                                       oracles.at("penalized").begin() + 23));
  const std::vector<int32_t>& json = want.at("json");
  EXPECT_NE(json, std::vector<int32_t>(oracles.at("json").begin(),
                                       oracles.at("json").begin() + json.size()));
  for (const char* id : {"logprobs", "guided-sampled-logprobs"}) {
    const proto::VerifyResult& w = want_finals.at(id);
    const proto::VerifyResult& g = got_finals.at(id);
    EXPECT_TRUE(g.finished()) << id;
    // One entry per generated token.
    ASSERT_GT(w.logprobs_size(), 0) << id;
    ASSERT_EQ(w.logprobs_start() + w.logprobs_size(), want.at(id).size()) << id;
    ASSERT_EQ(g.logprobs_size(), w.logprobs_size()) << id;
    EXPECT_EQ(g.logprobs_start(), w.logprobs_start()) << id;
    for (int i = 0; i < w.logprobs_size(); ++i) {
      EXPECT_EQ(g.logprobs(i).SerializeAsString(), w.logprobs(i).SerializeAsString())
          << id << " token " << i << ": " << g.logprobs(i).ShortDebugString() << " vs "
          << w.logprobs(i).ShortDebugString();
    }
  }
  // Both paths ran in the same engine: device verification for the plain
  // requests, rows copied to the host for the others, and never one of those on
  // the device.
  EXPECT_GT(store->verify_calls(), 10);
  EXPECT_GT(store->copied_rows(), 0);
  EXPECT_EQ(device.counters().host_rows_copied, static_cast<uint64_t>(store->copied_rows()));
  EXPECT_EQ(store->verified_needing_host(), 0);
  EXPECT_GT(store->guided_spans(), 0);
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
