#include "runtime/net/wire_format.h"

#include <random>

#include "gtest/gtest.h"

namespace splitspec::net {
namespace {

proto::Envelope SampleDraftBlock() {
  proto::Envelope envelope = NewEnvelope();
  proto::DraftBlock* block = envelope.mutable_draft_block();
  block->set_request_id("req-42");
  block->set_epoch(3);
  block->set_start(17);
  for (int t : {5, 9, 11}) block->add_tokens(t);
  for (int i = 0; i < 3; ++i) {
    proto::SparseDistribution* q = block->add_q();
    q->add_token_ids(5 + i);
    q->add_probs(0.75f);
    q->add_token_ids(100 + i);
    q->add_probs(0.25f);
  }
  return envelope;
}

TEST(WireFormatTest, DraftBlockRoundTrips) {
  const proto::Envelope sent = SampleDraftBlock();
  absl::StatusOr<proto::Envelope> back = DecodeEnvelope(EncodeEnvelope(sent));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->SerializeAsString(), sent.SerializeAsString());
  EXPECT_EQ(back->draft_block().q(2).token_ids(1), 102);
  EXPECT_STREQ(BodyName(*back), "draft_block");
}

TEST(WireFormatTest, EveryBodyKindRoundTrips) {
  std::vector<proto::Envelope> envelopes(6, NewEnvelope());
  envelopes[0].mutable_register_worker()->set_worker_name("draft-0");
  envelopes[1].mutable_heartbeat()->set_sequence(7);
  envelopes[2].mutable_verify_result()->add_committed_tokens(12);
  envelopes[3].mutable_submit()->mutable_params()->set_temperature(0.7f);
  envelopes[4].mutable_cancel()->set_request_id("r");
  envelopes[5].mutable_status_reply()->add_members()->set_worker_id(4);
  for (const proto::Envelope& sent : envelopes) {
    absl::StatusOr<proto::Envelope> back = DecodeEnvelope(EncodeEnvelope(sent));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->SerializeAsString(), sent.SerializeAsString()) << BodyName(sent);
  }
}

TEST(WireFormatTest, EncodeStampsTheVersion) {
  proto::Envelope unversioned;
  unversioned.mutable_heartbeat()->set_worker_id(1);
  absl::StatusOr<proto::Envelope> back = DecodeEnvelope(EncodeEnvelope(unversioned));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->protocol_version(), static_cast<uint32_t>(proto::PROTOCOL_VERSION_CURRENT));
}

TEST(WireFormatTest, RefusesShortFrame) {
  absl::StatusOr<proto::Envelope> back = DecodeEnvelope("SP");
  EXPECT_EQ(back.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(back.status().message().find("shorter than the magic"), std::string::npos);
}

TEST(WireFormatTest, RefusesBadMagic) {
  std::string frame = EncodeEnvelope(SampleDraftBlock());
  frame[0] = 'X';
  EXPECT_NE(DecodeEnvelope(frame).status().message().find("magic"), std::string::npos);
}

TEST(WireFormatTest, RefusesWrongVersion) {
  proto::Envelope envelope = SampleDraftBlock();
  envelope.set_protocol_version(99);
  const absl::Status status = DecodeEnvelope(EncodeEnvelope(envelope)).status();
  EXPECT_NE(status.message().find("protocol_version is 99"), std::string::npos) << status;
}

TEST(WireFormatTest, RefusesEnvelopeWithoutBody) {
  const absl::Status status = DecodeEnvelope(EncodeEnvelope(NewEnvelope())).status();
  EXPECT_NE(status.message().find("no body"), std::string::npos) << status;
}

TEST(WireFormatTest, RandomGarbageNeverDecodes) {
  std::mt19937 rng(std::random_device{}());
  int decoded = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string bytes(rng() % 300, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    if (DecodeEnvelope(bytes).ok()) ++decoded;
  }
  EXPECT_EQ(decoded, 0);
}

// Garbage behind a valid magic must also be refused, or survive as a valid Envelope.
TEST(WireFormatTest, GarbageBehindMagicIsHandled) {
  std::mt19937 rng(std::random_device{}());
  for (int i = 0; i < 2000; ++i) {
    std::string bytes(kFrameMagic);
    const size_t n = rng() % 64;
    for (size_t j = 0; j < n; ++j) bytes.push_back(static_cast<char>(rng()));
    absl::StatusOr<proto::Envelope> back = DecodeEnvelope(bytes);
    if (back.ok()) {
      EXPECT_EQ(back->protocol_version(), static_cast<uint32_t>(proto::PROTOCOL_VERSION_CURRENT));
      EXPECT_NE(back->body_case(), proto::Envelope::BODY_NOT_SET);
    }
  }
}

}  // namespace
}  // namespace splitspec::net
