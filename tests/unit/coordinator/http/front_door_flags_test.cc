// The front door's command-line flags.
#include "coordinator/http/front_door_flags.h"

#include <cstdlib>

#include "gtest/gtest.h"

namespace splitspec::coordinator::http {
namespace {

absl::StatusOr<std::optional<FrontDoorOptions>> Parse(const std::vector<std::string>& argv) {
  cli::FlagTable table{.command = "front door test", .summary = "", .flags = {}};
  AppendFrontDoorFlags(&table);
  absl::StatusOr<cli::CliArgs> args = cli::CliArgs::Parse(argv, table);
  if (!args.ok()) return args.status();
  return FrontDoorOptionsFromFlags(*args, "tcp://127.0.0.1:5555");
}

TEST(FrontDoorFlagsTest, NoHttpFlagMeansNoFrontDoor) {
  auto options = Parse({});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_FALSE(options->has_value());
}

TEST(FrontDoorFlagsTest, ReadsEveryFlag) {
  auto options = Parse({"--http", "0.0.0.0:8080", "--model", "/m.gguf", "--served-model-name", "smol",
                        "--api-key", "k", "--http-max-connections", "10", "--http-max-in-flight",
                        "3", "--http-max-connections-per-client", "4", "--http-parse-threads", "5",
                        "--metrics-open"});
  ASSERT_TRUE(options.ok()) << options.status();
  ASSERT_TRUE(options->has_value());
  const FrontDoorOptions& o = **options;
  EXPECT_EQ(o.http.host, "0.0.0.0");
  EXPECT_EQ(o.http.port, 8080);
  EXPECT_EQ(o.model_path, "/m.gguf");
  EXPECT_EQ(o.model_name, "smol");
  EXPECT_EQ(o.api_key, "k");
  EXPECT_EQ(o.http.max_connections, 10);
  EXPECT_EQ(o.max_in_flight, 3);
  EXPECT_EQ(o.http.max_connections_per_client, 4);
  EXPECT_EQ(o.parse_threads, 5);
  EXPECT_TRUE(o.metrics_open);
  EXPECT_EQ(o.coordinator_endpoint, "tcp://127.0.0.1:5555");
}

TEST(FrontDoorFlagsTest, LogprobsModeIsRawByDefaultAndProcessedOnRequest) {
  auto options = Parse({"--http", "127.0.0.1:8000", "--model", "/m.gguf"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ((*options)->logprobs_mode, proto::LOGPROBS_MODE_RAW);
  options = Parse({"--http", "127.0.0.1:8000", "--model", "/m.gguf", "--logprobs-mode", "processed"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ((*options)->logprobs_mode, proto::LOGPROBS_MODE_PROCESSED);
  options = Parse({"--http", "127.0.0.1:8000", "--model", "/m.gguf", "--logprobs-mode", "logits"});
  EXPECT_EQ(options.status().message(), "--logprobs-mode 'logits' is not raw or processed");
}

TEST(FrontDoorFlagsTest, ApiKeyDefaultsToTheEnvironment) {
  setenv("SPLITSPEC_API_KEY", "from-env", 1);
  auto options = Parse({"--http", "127.0.0.1:8000", "--model", "/m.gguf"});
  unsetenv("SPLITSPEC_API_KEY");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ((*options)->api_key, "from-env");
  EXPECT_EQ((*options)->http.host, "127.0.0.1");
  EXPECT_FALSE((*options)->metrics_open);  // /metrics needs the key unless opened
}

// Before typed switches, --metrics-open=false served /metrics without the API key.
TEST(FrontDoorFlagsTest, MetricsOpenFalseKeepsMetricsBehindTheKey) {
  for (const char* off : {"--metrics-open=false", "--metrics-open=0"}) {
    auto options = Parse({"--http", "127.0.0.1:8000", "--model", "/m.gguf", off});
    ASSERT_TRUE(options.ok()) << off << ": " << options.status();
    EXPECT_FALSE((*options)->metrics_open) << off;
  }
  auto on = Parse({"--http", "127.0.0.1:8000", "--model", "/m.gguf", "--metrics-open=true"});
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_TRUE((*on)->metrics_open);
  auto bad = Parse({"--http", "127.0.0.1:8000", "--model", "/m.gguf", "--metrics-open=no"});
  EXPECT_EQ(bad.status().message(), "switch --metrics-open takes true, false, 1 or 0, got 'no'");
}

// Before, 4294967297 (2^32 + 1) was narrowed into the int field: 1 connection.
TEST(FrontDoorFlagsTest, IntegerFlagsBeyondTheirFieldAreRefusedNotNarrowed) {
  for (const char* flag : {"--http-max-connections", "--http-max-in-flight",
                           "--http-max-connections-per-client", "--http-parse-threads"}) {
    auto options = Parse({"--http", "127.0.0.1:8000", "--model", "/m.gguf", flag, "4294967297"});
    EXPECT_EQ(options.status().message(),
              std::string(flag) + " 4294967297 is out of range [-2147483648, 2147483647]");
  }
}

TEST(FrontDoorFlagsTest, ToolCallParserByVllmsNames) {
  auto none = Parse({"--http", "127.0.0.1:8000", "--model", "/m.gguf"});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE((*none)->tool_call_parser.has_value());  // tool_choice "auto" is refused
  auto hermes =
      Parse({"--http", "127.0.0.1:8000", "--model", "/m.gguf", "--tool-call-parser", "hermes"});
  ASSERT_TRUE(hermes.ok()) << hermes.status();
  EXPECT_EQ((*hermes)->tool_call_parser, ToolCallFormat::kHermes);
  auto llama = Parse(
      {"--http", "127.0.0.1:8000", "--model", "/m.gguf", "--tool-call-parser", "llama3_json"});
  ASSERT_TRUE(llama.ok()) << llama.status();
  EXPECT_EQ((*llama)->tool_call_parser, ToolCallFormat::kLlama3Json);
  auto bad =
      Parse({"--http", "127.0.0.1:8000", "--model", "/m.gguf", "--tool-call-parser", "mistral"});
  EXPECT_EQ(bad.status().message(),
            "--tool-call-parser: unknown tool-call parser \"mistral\" (known: hermes, "
            "llama3_json)");
}

TEST(FrontDoorFlagsTest, BadFlagsAreRefusedNamingThem) {
  auto no_port = Parse({"--http", "localhost", "--model", "/m.gguf"});
  ASSERT_FALSE(no_port.ok());
  EXPECT_EQ(no_port.status().message(),
            "--http 'localhost' must be HOST:PORT, e.g. 127.0.0.1:8000");
  auto no_model = Parse({"--http", "127.0.0.1:8000"});
  ASSERT_FALSE(no_model.ok());
  EXPECT_EQ(no_model.status().message(), "--http needs --model PATH (the target's GGUF)");
  auto bad_port = Parse({"--http", "127.0.0.1:70000", "--model", "/m.gguf"});
  ASSERT_FALSE(bad_port.ok());
  EXPECT_EQ(bad_port.status().message(), "port 70000 outside [0, 65535]");
}

}  // namespace
}  // namespace splitspec::coordinator::http
