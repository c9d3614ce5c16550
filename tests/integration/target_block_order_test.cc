// A target worker's data port and the order messages arrive in: the coordinator
// sends a request's Assignment to the target before its draft worker, but on
// another connection, so the draft's first block can reach the target first. A
// target that dropped such a block left the request hung (the draft waiting for
// that block's result, the target for a block) or, with block_wait, deciding a
// position alone, which samples it differently: seen as a flaky
// PipelineGuidanceTest on a loaded machine.
#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/model/transformer.h"
#include "runtime/net/channel.h"
#include "runtime/net/wire_format.h"
#include "target_worker/target_service.h"
#include "tests/integration/stand_in_coordinator.h"
#include "tests/testing/tiny_model.h"

namespace splitspec {
namespace {

constexpr absl::Duration kReplyWait = absl::Seconds(30);

// A target worker on the tiny model, registered with a stand-in coordinator
// (`coordinator`), waiting as long as it takes for a draft worker's blocks.
struct TargetUnderTest {
  std::unique_ptr<model::LanguageModel> model;
  std::unique_ptr<net::Channel> coordinator;
  std::unique_ptr<target::TargetService> service;
  std::string coordinator_peer;  // the target's name on `coordinator`
  std::atomic<bool> stop{false};
  std::thread serving;

  ~TargetUnderTest() {
    stop = true;
    if (serving.joinable()) serving.join();
  }
};

void StartTarget(TargetUnderTest& t) {
  auto coordinator = net::ListenChannel("tcp://127.0.0.1:*");
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  t.coordinator = *std::move(coordinator);
  const std::string path = absl::StrCat(::testing::TempDir(), "/", getpid(), "-order.gguf");
  ASSERT_TRUE(model::WriteTinyModel(model::TinyModelOptions{}, path).ok());
  auto model = model::Transformer::Load(path, {.threads = 1});
  ASSERT_TRUE(model.ok()) << model.status();
  t.model = *std::move(model);
  target::TargetServiceOptions options;
  options.coordinator_endpoint = t.coordinator->endpoint();
  options.data_endpoint = "tcp://127.0.0.1:*";
  options.identity.name = "target-0";
  options.identity.model_path = path;
  options.engine.block_wait = absl::Hours(1);  // only the draft's block can decide
  auto service = target::TargetService::Create(t.model.get(), options);
  ASSERT_TRUE(service.ok()) << service.status();
  t.service = *std::move(service);
  t.serving = std::thread([&t] { (void)t.service->Run(t.stop); });
  absl::StatusOr<std::string> peer = testing::AcceptRegistration(*t.coordinator, 1, kReplyWait);
  ASSERT_TRUE(peer.ok()) << peer.status();
  t.coordinator_peer = *peer;
}

proto::Envelope GreedyAssignment(const std::string& id, uint64_t draft_worker_id) {
  proto::Envelope envelope = net::NewEnvelope();
  proto::Assignment* a = envelope.mutable_assignment();
  a->set_request_id(id);
  a->set_target_worker_id(1);
  a->set_draft_worker_id(draft_worker_id);
  for (int32_t token : {1, 2, 3}) a->add_committed_tokens(token);
  a->set_prompt_length(3);
  a->mutable_params()->set_max_tokens(8);
  a->set_verify_mode(proto::VERIFY_MODE_GREEDY);
  a->set_draft_k(2);
  a->set_epoch(1);
  return envelope;
}

proto::Envelope FirstBlock(const std::string& id) {
  proto::Envelope envelope = net::NewEnvelope();
  proto::DraftBlock* block = envelope.mutable_draft_block();
  block->set_request_id(id);
  block->set_epoch(1);
  block->set_start(3);  // right after the prompt
  block->set_block_sequence(1);
  block->add_tokens(5);
  block->add_tokens(6);
  return envelope;
}

TEST(TargetBlockOrderTest, ABlockThatArrivesBeforeItsAssignmentIsVerifiedOnceItComes) {
  TargetUnderTest t;
  ASSERT_NO_FATAL_FAILURE(StartTarget(t));
  auto draft = net::ConnectChannel(t.service->data_endpoint(), net::DraftPeerName(7));
  ASSERT_TRUE(draft.ok()) << draft.status();
  // The block first; the target drains it (its loop wakes on the data socket at
  // once) before the Assignment is even sent.
  ASSERT_TRUE((*draft)->Send("", FirstBlock("r")).ok());
  absl::SleepFor(absl::Milliseconds(300));
  ASSERT_TRUE(t.coordinator->Send(t.coordinator_peer, GreedyAssignment("r", 7)).ok());
  // The block's result: without the block the request would wait an hour.
  absl::StatusOr<proto::Envelope> result =
      testing::AwaitBody(**draft, proto::Envelope::kVerifyResult, kReplyWait);
  ASSERT_TRUE(result.ok()) << "the target dropped the block that came before its assignment: "
                           << result.status();
  EXPECT_EQ(result->verify_result().request_id(), "r");
  EXPECT_EQ(result->verify_result().block_sequence(), 1u);
  EXPECT_GE(result->verify_result().committed_tokens_size(), 1);
}

TEST(TargetBlockOrderTest, AnEarlyBlockIsTakenOnlyFromTheDraftWorkerTheAssignmentNames) {
  TargetUnderTest t;
  ASSERT_NO_FATAL_FAILURE(StartTarget(t));
  auto impostor = net::ConnectChannel(t.service->data_endpoint(), net::DraftPeerName(8));
  ASSERT_TRUE(impostor.ok()) << impostor.status();
  ASSERT_TRUE((*impostor)->Send("", FirstBlock("r")).ok());
  absl::SleepFor(absl::Milliseconds(300));
  ASSERT_TRUE(t.coordinator->Send(t.coordinator_peer, GreedyAssignment("r", 7)).ok());
  // Draft worker 7's own block, sent after the assignment, is the one verified.
  auto draft = net::ConnectChannel(t.service->data_endpoint(), net::DraftPeerName(7));
  ASSERT_TRUE(draft.ok()) << draft.status();
  proto::Envelope own = FirstBlock("r");
  own.mutable_draft_block()->set_block_sequence(2);
  ASSERT_TRUE((*draft)->Send("", own).ok());
  absl::StatusOr<proto::Envelope> result =
      testing::AwaitBody(**draft, proto::Envelope::kVerifyResult, kReplyWait);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->verify_result().block_sequence(), 2u);
  EXPECT_FALSE((*impostor)->Receive(absl::Milliseconds(300)).ok())
      << "draft worker 8 was not assigned request r";
}

}  // namespace
}  // namespace splitspec
