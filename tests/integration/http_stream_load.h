// Streaming load over a cluster's HTTP front door, for the tests that kill,
// stop or restart workers under load (serve supervision on the CPU, serve on
// cuda:0) and check that every stream still equals plain greedy decoding.
//
//   const std::vector<std::string> expected = PlainGreedyTexts(model, prompts, 40);
//   StreamingLoad load(port, prompts, expected, /*max_tokens=*/40);
//   load.Start(/*clients=*/3);
//   ... kill a worker ...
//   ASSERT_TRUE(load.WaitForMore(10));
//   load.Stop();
//   EXPECT_TRUE(load.failures().empty());
//
// Thread model: Start's clients run on their own threads; every other method
// is called from the test's thread (the counters are guarded).
#ifndef SPLITSPEC_TESTS_INTEGRATION_HTTP_STREAM_LOAD_H_
#define SPLITSPEC_TESTS_INTEGRATION_HTTP_STREAM_LOAD_H_

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/model/device.h"

namespace splitspec::testing {

// A TCP port on 127.0.0.1 that was free a moment ago (0 if none was found).
int FreeLoopbackPort();

struct StreamOutcome {
  bool completed = false;  // HTTP 200, a finish_reason, [DONE], no error event
  std::string text = {};
  std::string failure = {};  // why not completed
};

// One streamed greedy completion of `prompt` (token ids) on /v1/completions.
StreamOutcome StreamCompletion(int port, const std::vector<int32_t>& prompt, int max_tokens);

// Plain greedy decoding of each prompt by the model at `model_path` loaded on
// `device` in this process, cut at the first end-of-generation token (the front
// door stops there), decoded as the front door streams it. Failures to load are
// test failures (an empty result).
std::vector<std::string> PlainGreedyTexts(const std::string& model_path,
                                          const std::vector<std::vector<int32_t>>& prompts,
                                          int max_tokens, model::DeviceSpec device = {});

// Clients streaming completions, one after another, until stopped; each stream
// must equal expected[prompt] to count as exact.
class StreamingLoad {
 public:
  StreamingLoad(int port, std::vector<std::vector<int32_t>> prompts,
                std::vector<std::string> expected, int max_tokens);
  ~StreamingLoad() { Stop(); }
  StreamingLoad(const StreamingLoad&) = delete;
  StreamingLoad& operator=(const StreamingLoad&) = delete;

  void Start(int clients);
  void Stop();
  int exact();
  std::vector<std::string> failures();
  // Waits (bounded: 1200 checks 100 ms apart) until `more` further streams finished exactly.
  bool WaitForMore(int more);

 private:
  const int port_;
  const std::vector<std::vector<int32_t>> prompts_;
  const std::vector<std::string> expected_;
  const int max_tokens_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
  std::mutex mu_;
  int exact_ = 0;
  std::vector<std::string> failures_;
};

}  // namespace splitspec::testing

#endif  // SPLITSPEC_TESTS_INTEGRATION_HTTP_STREAM_LOAD_H_
