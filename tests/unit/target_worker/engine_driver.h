// DriveEngine: plays the coordinator and a draft worker around a TargetEngine, for
// tests that run the same traffic through two engines and compare what they commit
// (tests only; never linked into a binary users run).
//
//   std::map<std::string, std::vector<int32_t>> seen = DriveEngine(engine, assignments, oracle);
//
// Drafting policy, a function of the committed sequence only (so two engines that
// commit the same tokens get the same blocks): whenever a request's result reaches
// its draft peer (and once after its prompt), a block of k = 1 + (blocks % 3) tokens
// is queued at the frontier, taken from `oracle` (the sequence a good draft would
// guess), with the middle token of every third block changed, and a second block
// right after it (lookahead, so a fully accepted block is followed without a bonus).
// In rejection mode each drafted token carries q = {token: 0.6, token + 1: 0.4}.
#ifndef SPLITSPEC_TESTS_UNIT_TARGET_WORKER_ENGINE_DRIVER_H_
#define SPLITSPEC_TESTS_UNIT_TARGET_WORKER_ENGINE_DRIVER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "proto/splitspec.pb.h"
#include "target_worker/target_engine.h"

namespace splitspec::testing {

inline proto::DraftBlock OracleBlock(const proto::VerifyResult& at, int start, int k,
                                     const std::vector<int32_t>& oracle, int vocab,
                                     proto::VerifyMode mode, uint64_t* sequence) {
  proto::DraftBlock block;
  block.set_request_id(at.request_id());
  block.set_epoch(at.epoch());
  block.set_start(static_cast<uint32_t>(start));
  block.set_block_sequence(++*sequence);
  for (int i = 0; i < k && start + i < static_cast<int>(oracle.size()); ++i) {
    int32_t token = oracle[start + i];
    if (*sequence % 3 == 0 && i == k / 2) token = (token + 7) % vocab;
    block.add_tokens(token);
    if (mode == proto::VERIFY_MODE_REJECTION) {
      proto::SparseDistribution* q = block.add_q();
      q->add_token_ids(token);
      q->add_probs(0.6f);
      q->add_token_ids((token + 1) % vocab);
      q->add_probs(0.4f);
    }
  }
  return block;
}

// Runs until no request is left (or max_steps); returns each request's committed
// tokens as the coordinator saw them. Expects every Step to succeed. `finals`,
// if set, gets each request's last result to the coordinator (the whole
// sequence, with its logprobs, once it finished).
inline std::map<std::string, std::vector<int32_t>> DriveEngine(
    target::TargetEngine& engine, const std::vector<proto::Assignment>& assignments,
    const std::map<std::string, std::vector<int32_t>>& oracles, int vocab, int max_steps = 2000,
    std::map<std::string, proto::VerifyResult>* finals = nullptr) {
  std::map<std::string, std::vector<int32_t>> seen;
  std::map<std::string, proto::VerifyMode> modes;
  uint64_t sequence = 0;
  auto propose = [&](const proto::VerifyResult& at) {
    const std::vector<int32_t>& oracle = oracles.at(at.request_id());
    const int frontier = static_cast<int>(at.frontier());
    const int k = 1 + static_cast<int>(sequence % 3);
    const proto::VerifyMode mode = modes[at.request_id()];
    engine.AddBlock(OracleBlock(at, frontier, k, oracle, vocab, mode, &sequence), "driver");
    engine.AddBlock(OracleBlock(at, frontier + k, k, oracle, vocab, mode, &sequence), "driver");
  };
  for (const proto::Assignment& a : assignments) {
    EXPECT_TRUE(engine.AddRequest(a).ok()) << a.request_id();
    seen[a.request_id()].assign(a.committed_tokens().begin(), a.committed_tokens().end());
    modes[a.request_id()] = a.verify_mode();
    if (a.draft_worker_id() == 0) continue;
    proto::VerifyResult start;
    start.set_request_id(a.request_id());
    start.set_epoch(a.epoch());
    start.set_frontier(static_cast<uint32_t>(a.committed_tokens_size()));
    propose(start);
  }
  const absl::Time now = absl::Now();
  std::vector<target::TargetEvent> events;
  for (int step = 0; step < max_steps && engine.HasWork(now); ++step) {
    events.clear();
    const absl::Status status = engine.Step(now, &events);
    EXPECT_TRUE(status.ok()) << status;
    if (!status.ok()) break;
    for (const target::TargetEvent& e : events) {
      if (e.to_coordinator) {
        std::vector<int32_t>& s = seen[e.result.request_id()];
        const std::vector<int32_t> tokens(e.result.committed_tokens().begin(),
                                          e.result.committed_tokens().end());
        if (e.result.full_sequence()) {
          s = tokens;
        } else {
          s.insert(s.end(), tokens.begin(), tokens.end());
        }
        if (finals != nullptr) (*finals)[e.result.request_id()] = e.result;
      }
      if (!e.draft_peer.empty() && !e.result.finished()) propose(e.result);
    }
  }
  EXPECT_EQ(engine.active_requests(), 0)
      << "the traffic did not finish in " << max_steps << " steps";
  return seen;
}

}  // namespace splitspec::testing

#endif  // SPLITSPEC_TESTS_UNIT_TARGET_WORKER_ENGINE_DRIVER_H_
