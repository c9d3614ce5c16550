// FakeDrafter: a small deterministic Drafter for the DraftEngine specs (tests
// only; never linked into a binary users run).
//
// It keeps the Drafter protocol (runtime/spec/drafter.h) strictly: Propose
// refuses a context that does not extend the sequence it holds, so an engine
// that forgets to truncate after a resync is caught. Its proposal after a
// sequence is a fixed function of that sequence (NextToken), so a test can
// predict every block. Failures can be injected per request or for a whole step.
#ifndef SPLITSPEC_TESTS_UNIT_DRAFT_WORKER_FAKE_DRAFTER_H_
#define SPLITSPEC_TESTS_UNIT_DRAFT_WORKER_FAKE_DRAFTER_H_

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/spec/drafter.h"

namespace splitspec::testing {

class FakeDrafter : public spec::Drafter {
 public:
  static constexpr int kVocab = 32;

  // One request of one recorded Propose call.
  struct Proposal {
    std::string request_id;
    std::vector<int32_t> context;
    int k = 0;
  };

  static int32_t NextToken(const std::vector<int32_t>& sequence) {
    return static_cast<int32_t>((3 * sequence.back() + 1 + static_cast<int>(sequence.size())) %
                                kVocab);
  }

  // `sequence` followed by its next n draft tokens.
  static std::vector<int32_t> Extend(std::vector<int32_t> sequence, int n) {
    for (int i = 0; i < n; ++i) sequence.push_back(NextToken(sequence));
    return sequence;
  }

  void FailRequest(const std::string& id) { failing_.insert(id); }
  void FailNextPropose(absl::Status status) { fail_next_ = std::move(status); }
  // Reports confidence classes: class_of(start, i) for the i-th draft of a
  // proposal starting at position `start` (as the lookup drafter does).
  void ReportConfidence(std::function<int8_t(size_t start, int position)> class_of) {
    class_of_ = std::move(class_of);
  }
  // Proposes nothing for `id` (as a model-free drafter with no match does).
  void ProposeNothingFor(const std::string& id) { silent_.insert(id); }
  void ProposeAgainFor(const std::string& id) { silent_.erase(id); }

  // Called in Propose with the context tokens the request's drafter takes in
  // (past what it holds; all of them at its first Propose, as a model drafter
  // prefills lazily): a test's clock can charge them.
  void OnTakeIn(std::function<void(size_t tokens)> on_take_in) {
    on_take_in_ = std::move(on_take_in);
  }

  const std::vector<Proposal>& proposals() const { return proposals_; }
  // The sequence held for `id`, or nullopt if not started.
  std::optional<std::vector<int32_t>> Held(const std::string& id) const {
    auto it = held_.find(id);
    if (it == held_.end()) return std::nullopt;
    return it->second;
  }

  absl::string_view name() const override { return "fake"; }

  absl::Status Start(const std::string& id, absl::Span<const int32_t> tokens) override {
    if (held_.contains(id))
      return absl::AlreadyExistsError(absl::StrCat("request ", id, " started twice"));
    held_[id].assign(tokens.begin(), tokens.end());
    return absl::OkStatus();
  }

  absl::Status Truncate(const std::string& id, int64_t length) override {
    auto it = held_.find(id);
    if (it == held_.end()) return absl::NotFoundError(absl::StrCat("request ", id, " not started"));
    if (length < 0 || length > static_cast<int64_t>(it->second.size())) {
      return absl::OutOfRangeError(
          absl::StrCat("truncate ", id, " to ", length, " > ", it->second.size()));
    }
    it->second.resize(static_cast<size_t>(length));
    return absl::OkStatus();
  }

  void Release(const std::string& id) override {
    held_.erase(id);
    proposed_.erase(id);
  }

  absl::Status Propose(absl::Span<spec::DraftRequest> batch) override {
    if (fail_next_.has_value()) {
      absl::Status status = *std::move(fail_next_);
      fail_next_.reset();
      return status;
    }
    for (spec::DraftRequest& request : batch) {
      std::vector<int32_t> context(request.context.begin(), request.context.end());
      proposals_.push_back({request.request_id, context, request.k});
      auto it = held_.find(request.request_id);
      if (it == held_.end()) {
        request.status =
            absl::NotFoundError(absl::StrCat("request ", request.request_id, " not started"));
        continue;
      }
      const std::vector<int32_t>& held = it->second;
      if (context.size() < held.size() || !std::equal(held.begin(), held.end(), context.begin())) {
        request.status = absl::FailedPreconditionError(absl::StrCat(
            "request ", request.request_id, ": context does not extend the held sequence"));
        continue;
      }
      if (on_take_in_) {
        on_take_in_(proposed_.insert(request.request_id).second ? context.size()
                                                                  : context.size() - held.size());
      }
      if (failing_.contains(request.request_id)) {
        request.status = absl::InternalError("fake draft failure");
        continue;
      }
      std::vector<int32_t> extended =
          Extend(context, silent_.contains(request.request_id) ? 0 : request.k);
      request.tokens.assign(extended.begin() + context.size(), extended.end());
      // Alternatives: the drafted token first, then the tokens after it, mod kVocab.
      for (size_t i = 0; request.alternatives > 0 && i < request.tokens.size(); ++i) {
        spec::SparseDistribution top;
        for (int a = 0; a < request.alternatives; ++a) {
          top.token_ids.push_back((request.tokens[i] + a) % kVocab);
          top.probs.push_back(1.0f / static_cast<float>(a + 1));
        }
        request.top.push_back(std::move(top));
      }
      if (request.mode == spec::VerifyMode::kRejection) {
        for (int32_t token : request.tokens) request.q.push_back({{token}, {1.0f}});
      }
      request.confidence.clear();
      for (int i = 0; class_of_ && i < static_cast<int>(request.tokens.size()); ++i)
        request.confidence.push_back(class_of_(context.size(), i));
      it->second = std::move(extended);
    }
    return absl::OkStatus();
  }

 private:
  std::map<std::string, std::vector<int32_t>> held_;
  std::set<std::string> failing_;
  std::set<std::string> silent_;
  std::optional<absl::Status> fail_next_;
  std::function<int8_t(size_t, int)> class_of_;
  std::function<void(size_t)> on_take_in_;
  std::set<std::string> proposed_;  // requests proposed for since their Start
  std::vector<Proposal> proposals_;
};

}  // namespace splitspec::testing

#endif  // SPLITSPEC_TESTS_UNIT_DRAFT_WORKER_FAKE_DRAFTER_H_
