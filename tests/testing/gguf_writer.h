// Builds GGUF v3 (or v2) files from metadata and raw tensor bytes, mainly so that
// tests can make tiny models and corrupt them on purpose.
//
//   GgufWriter w;
//   w.SetString("general.architecture", "llama");
//   w.SetUint32("llama.block_count", 2);
//   w.SetStringArray("tokenizer.ggml.tokens", {"a", "b"});
//   RETURN_IF_ERROR(w.AddTensor("token_embd.weight", {64, 300}, GgmlType::kF32, bytes));
//   std::vector<uint8_t> image = w.Serialize();       // or w.WriteFile(path)
//
// Metadata keys are written in the order first set; setting a key again replaces
// its value in place. `general.alignment` is written when set_alignment() is
// called with a value other than the default 32. Tensor data is laid out in the
// order added, each tensor padded to the alignment. Not thread-safe.
#ifndef SPLITSPEC_TESTS_TESTING_GGUF_WRITER_H_
#define SPLITSPEC_TESTS_TESTING_GGUF_WRITER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/cpu/ggml_types.h"
#include "runtime/model/gguf_reader.h"

namespace splitspec::model {

class GgufWriter {
 public:
  // REQUIRES: version is 2 or 3 (anything else is written as given, for tests of refusal).
  void set_version(uint32_t version) { version_ = version; }
  // REQUIRES: a power of two. Also sets the `general.alignment` key.
  void set_alignment(uint32_t alignment);

  void SetUint8(std::string_view key, uint8_t v) { SetScalar(key, GgufValueType::kUint8, &v, 1); }
  void SetInt8(std::string_view key, int8_t v) { SetScalar(key, GgufValueType::kInt8, &v, 1); }
  void SetUint16(std::string_view key, uint16_t v) {
    SetScalar(key, GgufValueType::kUint16, &v, 2);
  }
  void SetInt16(std::string_view key, int16_t v) { SetScalar(key, GgufValueType::kInt16, &v, 2); }
  void SetUint32(std::string_view key, uint32_t v) {
    SetScalar(key, GgufValueType::kUint32, &v, 4);
  }
  void SetInt32(std::string_view key, int32_t v) { SetScalar(key, GgufValueType::kInt32, &v, 4); }
  void SetUint64(std::string_view key, uint64_t v) {
    SetScalar(key, GgufValueType::kUint64, &v, 8);
  }
  void SetInt64(std::string_view key, int64_t v) { SetScalar(key, GgufValueType::kInt64, &v, 8); }
  void SetFloat32(std::string_view key, float v) { SetScalar(key, GgufValueType::kFloat32, &v, 4); }
  void SetFloat64(std::string_view key, double v) {
    SetScalar(key, GgufValueType::kFloat64, &v, 8);
  }
  void SetBool(std::string_view key, bool v);
  void SetString(std::string_view key, std::string_view v);
  void SetStringArray(std::string_view key, const std::vector<std::string>& v);
  void SetFloat32Array(std::string_view key, absl::Span<const float> v);
  void SetInt32Array(std::string_view key, absl::Span<const int32_t> v);

  // Adds a tensor. dims[0] is the row length. `data` must hold exactly the bytes
  // of that many elements of `type`. Errors (InvalidArgument, nothing added):
  // duplicate name, empty or more than 4 dims, a zero dim, a row length that is not
  // a multiple of the block size, or a byte count that does not match.
  absl::Status AddTensor(std::string_view name, const std::vector<int64_t>& dims,
                         kernels::GgmlType type, absl::Span<const uint8_t> data);

  // The complete file image.
  std::vector<uint8_t> Serialize() const;
  // Writes Serialize() to `path` (replacing it). Errors: Unavailable naming the path.
  absl::Status WriteFile(const std::string& path) const;

 private:
  struct Entry {
    std::string key;
    std::vector<uint8_t> encoded;  // value type + value, as in the file
  };
  struct Tensor {
    std::string name;
    std::vector<int64_t> dims;
    kernels::GgmlType type;
    std::vector<uint8_t> data;
  };
  void SetScalar(std::string_view key, GgufValueType type, const void* v, size_t n);
  void SetEncoded(std::string_view key, std::vector<uint8_t> encoded);

  uint32_t version_ = 3;
  uint32_t alignment_ = static_cast<uint32_t>(kGgufDefaultAlignment);
  std::vector<Entry> entries_;
  std::vector<Tensor> tensors_;
};

}  // namespace splitspec::model

#endif  // SPLITSPEC_TESTS_TESTING_GGUF_WRITER_H_
