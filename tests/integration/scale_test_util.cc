#include "tests/integration/scale_test_util.h"

#include <signal.h>

#include <set>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/integration/child_process.h"
#include "tests/integration/cluster_test_util.h"
#include "tests/integration/plain_greedy.h"

namespace splitspec::testing {

std::vector<int64_t> ScaleRun::Values(const std::string& event, const std::string& key) const {
  std::vector<int64_t> values;
  const std::string event_text = absl::StrCat("\"event\":\"", event, "\"");
  const std::string key_text = absl::StrCat("\"", key, "\":");
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (line.find(event_text) == absl::string_view::npos) continue;
    const size_t at = line.find(key_text);
    if (at == absl::string_view::npos) continue;
    absl::string_view rest = line.substr(at + key_text.size());
    if (!rest.empty() && rest[0] == '[') rest.remove_prefix(1);  // the first of a list
    const size_t end = rest.find_first_not_of("-0123456789");
    int64_t value = 0;
    if (absl::SimpleAtoi(rest.substr(0, end), &value)) values.push_back(value);
  }
  return values;
}

ScaleRun RunScale(const std::vector<std::string>& prefix, const std::vector<std::string>& args,
                  const std::string& log_path) {
  std::vector<std::string> argv = prefix;
  argv.push_back(BinaryPath("splitspec"));
  argv.push_back("scale");
  argv.insert(argv.end(), args.begin(), args.end());
  ScaleRun run;
  absl::StatusOr<ChildProcess> process = ChildProcess::Spawn(argv, log_path);
  if (!process.ok()) {
    run.output = std::string(process.status().message());
    return run;
  }
  absl::StatusOr<int> code = process->Wait(absl::Minutes(10));
  run.exit_code = code.ok() ? *code : -1;
  run.output = process->ReadLog();
  return run;
}

namespace {

// Alive and not a zombie waiting for a parent that does not reap.
bool Running(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  const std::string stat = ReadFileOrEmpty(absl::StrCat("/proc/", pid, "/stat"));
  const size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] != 'Z';
}

}  // namespace

void StopDetached(const std::vector<pid_t>& pids) {
  for (pid_t pid : pids) {
    if (pid > 0) ::kill(pid, SIGTERM);
  }
  for (int i = 0; i < 200; ++i) {
    bool any = false;
    for (pid_t pid : pids) any |= pid > 0 && Running(pid);
    if (!any) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (pid_t pid : pids) {
    if (pid > 0 && Running(pid)) ::kill(pid, SIGKILL);
  }
}

LoadOutcome RunGreedyLoad(const std::string& coordinator, model::Transformer& reference,
                          const std::vector<std::vector<int32_t>>& prompts,
                          const LoadOptions& options, const std::atomic<bool>& stop,
                          const std::atomic<int>& phase) {
  LoadOutcome outcome;
  std::vector<std::vector<int32_t>> expected;
  for (const std::vector<int32_t>& prompt : prompts)
    expected.push_back(PlainGreedy(reference, prompt, options.max_tokens));
  absl::StatusOr<std::unique_ptr<net::RequestClient>> client =
      net::RequestClient::Connect(coordinator);
  if (!client.ok()) {
    outcome.failures.push_back(absl::StrCat("cannot connect: ", client.status().message()));
    return outcome;
  }
  std::map<std::string, size_t> prompt_of;
  std::set<std::string> pending;
  std::map<int, int> submitted_in_phase;
  const absl::Time deadline = absl::Now() + options.deadline;
  while (absl::Now() < deadline) {
    const bool stopped = stop.load() && outcome.submitted >= options.min_requests;
    while (!stopped && static_cast<int>(pending.size()) < options.in_flight) {
      if (submitted_in_phase[phase.load()] >= options.max_requests_per_phase) break;
      const std::string id = absl::StrCat("load-", outcome.submitted);
      const size_t p = outcome.submitted % prompts.size();
      proto::SubmitRequest submit;
      submit.set_request_id(id);
      submit.mutable_prompt_tokens()->Assign(prompts[p].begin(), prompts[p].end());
      submit.mutable_params()->set_temperature(0.0f);
      submit.mutable_params()->set_max_tokens(options.max_tokens);
      submit.set_verify_mode(proto::VERIFY_MODE_GREEDY);
      submit.set_draft_k(4);
      absl::Status sent = (*client)->Submit(submit);
      if (!sent.ok()) {
        outcome.failures.push_back(absl::StrCat(id, ": submit failed: ", sent.message()));
        return outcome;
      }
      prompt_of[id] = p;
      outcome.phase_of[id] = phase.load();
      ++submitted_in_phase[outcome.phase_of[id]];
      pending.insert(id);
      ++outcome.submitted;
    }
    if (stopped && pending.empty()) break;  // a full phase polls on, awaiting the next step
    absl::Status polled = (*client)->Poll(absl::Milliseconds(50));
    if (!polled.ok()) {
      outcome.failures.push_back(absl::StrCat("poll failed: ", polled.message()));
      return outcome;
    }
    for (auto it = pending.begin(); it != pending.end();) {
      if (!(*client)->Done(*it)) {
        ++it;
        continue;
      }
      const net::GenerationResult& result = (*client)->Result(*it);
      outcome.results[*it] = result;
      const std::vector<int32_t>& want = expected[prompt_of[*it]];
      if (result.tokens == want && result.finish_reason == proto::FINISH_REASON_LENGTH &&
          result.error.empty()) {
        ++outcome.finished_ok;
      } else {
        outcome.failures.push_back(
            absl::StrCat(*it, ": ", result.tokens.size(), " tokens (want ", want.size(),
                         "), finish ", proto::FinishReason_Name(result.finish_reason),
                         result.tokens == want ? ", tokens equal" : ", tokens DIFFER",
                         result.error.empty() ? "" : ", error: ", result.error));
      }
      it = pending.erase(it);
    }
  }
  for (const std::string& id : pending)
    outcome.failures.push_back(absl::StrCat(id, ": did not finish"));
  return outcome;
}

}  // namespace splitspec::testing
