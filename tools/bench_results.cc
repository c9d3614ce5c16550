#include "tools/bench_results.h"

#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace splitspec::tools {

std::string DecodeMeasure(int batch) { return absl::StrCat("decode_b", batch); }
std::string PrefillMeasure(int tokens) { return absl::StrCat("prefill_", tokens); }
std::string VerifyMeasure(int k) { return absl::StrCat("verify_k", k); }

namespace {

// One JSON value as protobuf's JSON printer writes it (strings escaped).
absl::StatusOr<std::string> JsonValue(const google::protobuf::Value& value) {
  std::string json;
  const auto printed = google::protobuf::util::MessageToJsonString(value, &json);
  if (!printed.ok()) return absl::InternalError(absl::StrCat("bench result: ", printed.ToString()));
  return json;
}

}  // namespace

absl::StatusOr<std::string> BenchResultJson(const BenchResult& r) {
  // Fixed key order, so that a results file diffs line by line.
  const std::pair<const char*, const std::string*> strings[] = {{"engine", &r.engine},
                                                                {"gpu", &r.gpu},
                                                                {"shape", &r.shape},
                                                                {"measure", &r.measure},
                                                                {"command", &r.command}};
  std::string line = "{";
  for (const auto& [name, text] : strings) {
    if (text->empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("bench result: field '", name, "' is empty (measure '", r.measure, "')"));
    }
    google::protobuf::Value value;
    value.set_string_value(*text);
    absl::StatusOr<std::string> json = JsonValue(value);
    if (!json.ok()) return json.status();
    absl::StrAppend(&line, line.size() > 1 ? "," : "", "\"", name, "\":", *json);
    if (std::string(name) == "measure") {
      if (!std::isfinite(r.value)) {
        return absl::InvalidArgumentError(
            absl::StrCat("bench result: value of ", r.measure, " is ", r.value, ", not finite"));
      }
      google::protobuf::Value number;
      number.set_number_value(r.value);
      absl::StatusOr<std::string> v = JsonValue(number);
      if (!v.ok()) return v.status();
      absl::StrAppend(&line, ",\"value\":", *v);
    }
  }
  return line + "}";
}

absl::Status AppendBenchResults(const std::string& path, absl::Span<const BenchResult> results) {
  std::string text;
  for (const BenchResult& r : results) {
    absl::StatusOr<std::string> line = BenchResultJson(r);
    if (!line.ok()) return line.status();
    absl::StrAppend(&text, *line, "\n");
  }
  const std::filesystem::path file(path);
  std::error_code error;
  if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path(), error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("results file ", path, ": cannot create its folder: ", error.message()));
  }
  std::ofstream out(path, std::ios::app);
  out << text;
  out.flush();
  if (!out) return absl::InternalError(absl::StrCat("results file ", path, ": cannot write"));
  return absl::OkStatus();
}

std::string GpuResultsPath(absl::Time day, const std::string& gpu) {
  std::string slug;
  for (char c : gpu) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      slug.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    } else if (!slug.empty() && slug.back() != '-') {
      slug.push_back('-');
    }
  }
  while (!slug.empty() && slug.back() == '-') slug.pop_back();
  if (slug.empty()) slug = "unknown-gpu";
  return absl::StrCat("bench/results/gpu/", absl::FormatTime("%Y-%m-%d", day, absl::UTCTimeZone()),
                      "-", slug, ".jsonl");
}

absl::StatusOr<std::string> DeviceLabel(const model::DeviceSpec& device) {
  if (!device.is_cuda()) return std::string("cpu");
  absl::StatusOr<model::DeviceMemoryInfo> info =
      model::SystemDeviceProbe().QueryCuda(device.ordinal);
  if (!info.ok()) return info.status();
  return info->name;
}

std::string ShapeLabel(const std::string& model_path) {
  std::string name = std::filesystem::path(model_path).filename().string();
  const std::string suffix = ".gguf";
  if (name.size() > suffix.size() &&
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
    name.resize(name.size() - suffix.size());
  }
  return name;
}

}  // namespace splitspec::tools
