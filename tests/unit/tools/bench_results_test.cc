// The GPU routine's results lines (tools/bench_results.h): what a line holds, how
// strings are escaped, refusals, appending, and the file's name.
#include "tools/bench_results.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace splitspec::tools {
namespace {

using ::testing::HasSubstr;

BenchResult Sample() {
  return {
      "splitspec",      "NVIDIA H200", "llama-3.2-1b-q4_0",
      VerifyMeasure(5), 1.1234,        "splitspec bench verify --model \"m.gguf\" --device cuda:0"};
}

// The line parsed back as JSON.
google::protobuf::Struct Parse(const std::string& line) {
  google::protobuf::Struct parsed;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(line, &parsed).ok()) << line;
  return parsed;
}

TEST(BenchResultsTest, ALineHoldsEveryFieldAndParsesBack) {
  const absl::StatusOr<std::string> line = BenchResultJson(Sample());
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(line->find('\n'), std::string::npos);
  // A fixed key order, so that a results file diffs line by line.
  EXPECT_THAT(*line, ::testing::StartsWith(
                         "{\"engine\":\"splitspec\",\"gpu\":\"NVIDIA H200\",\"shape\":"
                         "\"llama-3.2-1b-q4_0\",\"measure\":\"verify_k5\",\"value\":1.1234,"
                         "\"command\":"));
  const google::protobuf::Struct parsed = Parse(*line);
  const auto& fields = parsed.fields();
  EXPECT_EQ(fields.size(), 6u);
  EXPECT_EQ(fields.at("engine").string_value(), "splitspec");
  EXPECT_EQ(fields.at("gpu").string_value(), "NVIDIA H200");
  EXPECT_EQ(fields.at("shape").string_value(), "llama-3.2-1b-q4_0");
  EXPECT_EQ(fields.at("measure").string_value(), "verify_k5");
  EXPECT_DOUBLE_EQ(fields.at("value").number_value(), 1.1234);
  // Quotes inside the command survive the round trip.
  EXPECT_EQ(fields.at("command").string_value(),
            "splitspec bench verify --model \"m.gguf\" --device cuda:0");
}

TEST(BenchResultsTest, MeasureNamesFollowTheRoutine) {
  EXPECT_EQ(DecodeMeasure(1), "decode_b1");
  EXPECT_EQ(DecodeMeasure(64), "decode_b64");
  EXPECT_EQ(PrefillMeasure(512), "prefill_512");
  EXPECT_EQ(VerifyMeasure(16), "verify_k16");
}

TEST(BenchResultsTest, RefusesEmptyFieldsAndNonFiniteValues) {
  BenchResult no_gpu = Sample();
  no_gpu.gpu.clear();
  EXPECT_THAT(std::string(BenchResultJson(no_gpu).status().message()), HasSubstr("'gpu'"));
  BenchResult nan = Sample();
  nan.value = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THAT(std::string(BenchResultJson(nan).status().message()), HasSubstr("verify_k5 is nan"));
}

TEST(BenchResultsTest, AppendsLinesAndCreatesTheFolder) {
  const std::filesystem::path dir =
      std::filesystem::path(testing::TempDir()) / "bench_results_test" / "gpu";
  std::filesystem::remove_all(dir.parent_path());
  const std::string path = (dir / "run.jsonl").string();
  BenchResult b1 = Sample();
  b1.measure = DecodeMeasure(1);
  b1.value = 452.5;
  ASSERT_TRUE(AppendBenchResults(path, {Sample()}).ok());
  ASSERT_TRUE(AppendBenchResults(path, {b1}).ok());
  std::ifstream in(path);
  std::string first, second, third;
  ASSERT_TRUE(std::getline(in, first));
  ASSERT_TRUE(std::getline(in, second));
  EXPECT_FALSE(std::getline(in, third));
  EXPECT_EQ(Parse(first).fields().at("measure").string_value(), "verify_k5");
  EXPECT_DOUBLE_EQ(Parse(second).fields().at("value").number_value(), 452.5);
}

TEST(BenchResultsTest, AnInvalidResultWritesNothing) {
  const std::string path = testing::TempDir() + "/bench_results_invalid.jsonl";
  std::remove(path.c_str());
  BenchResult bad = Sample();
  bad.shape.clear();
  EXPECT_FALSE(AppendBenchResults(path, {Sample(), bad}).ok());
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(BenchResultsTest, TheFileIsNamedByDateAndGpu) {
  const absl::Time day =
      absl::FromCivil(absl::CivilSecond(2026, 11, 27, 23, 59, 0), absl::UTCTimeZone());
  EXPECT_EQ(GpuResultsPath(day, "NVIDIA H200"), "bench/results/gpu/2026-11-27-nvidia-h200.jsonl");
  EXPECT_EQ(GpuResultsPath(day, "NVIDIA H100 80GB HBM3 "),
            "bench/results/gpu/2026-11-27-nvidia-h100-80gb-hbm3.jsonl");
  EXPECT_EQ(GpuResultsPath(day, "  "), "bench/results/gpu/2026-11-27-unknown-gpu.jsonl");
}

TEST(BenchResultsTest, TheShapeLabelIsTheModelFilesStem) {
  EXPECT_EQ(ShapeLabel("models/SmolLM2-135M-Instruct.Q4_1.gguf"), "SmolLM2-135M-Instruct.Q4_1");
  EXPECT_EQ(ShapeLabel("/tmp/bench-8b"), "bench-8b");
}

TEST(BenchResultsTest, ACpuRunIsLabelledCpu) {
  const absl::StatusOr<std::string> label = DeviceLabel(model::DeviceSpec{});
  ASSERT_TRUE(label.ok()) << label.status();
  EXPECT_EQ(*label, "cpu");
}

}  // namespace
}  // namespace splitspec::tools
