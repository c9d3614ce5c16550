// Read-only access to a GGUF file (versions 2 and 3): typed metadata and tensor data.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(path));
//   ASSIGN_OR_RETURN(std::string_view arch, file->GetString("general.architecture"));
//   ASSIGN_OR_RETURN(uint32_t layers, file->GetUint32("llama.block_count"));
//   ASSIGN_OR_RETURN(std::vector<std::string_view> tokens,
//                    file->GetStringArray("tokenizer.ggml.tokens"));
//   ASSIGN_OR_RETURN(const GgufTensorInfo* t, file->GetTensor("token_embd.weight"));
//   const uint8_t* bytes = t->data;   // t->num_bytes bytes, inside the mapping
//
// The file is memory-mapped read-only. Open() parses and validates the whole
// header up front: every count, length, offset and size is checked against the
// file size before it is used, so a truncated, corrupted or hostile file is
// refused with a message naming the key or tensor at fault, and nothing past
// the end of the file is ever read. Counts are checked against the bytes left
// before anything is allocated for them.
//
// Lifetime: every string_view, span and data pointer handed out points into the
// mapping (or the owned buffer) and stays valid as long as the GgufFile lives.
// Thread safety: a GgufFile is immutable after Open(); all const methods may be
// called concurrently.
#ifndef SPLITSPEC_RUNTIME_MODEL_GGUF_READER_H_
#define SPLITSPEC_RUNTIME_MODEL_GGUF_READER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/cpu/ggml_types.h"

namespace splitspec::model {

// Value types as numbered by the GGUF format.
enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// "u32", "string", "array", ...; "unknown" for a number outside the enum.
const char* GgufValueTypeName(GgufValueType type);

// Default alignment of the tensor data section when `general.alignment` is absent.
inline constexpr uint64_t kGgufDefaultAlignment = 32;
// Most dimensions a tensor may have (as in ggml).
inline constexpr int kGgufMaxDims = 4;

struct GgufTensorInfo {
  std::string name;
  // dims[0] is the fastest-varying (row length); a 2-D weight is [cols, rows].
  std::vector<int64_t> dims;
  kernels::GgmlType type = kernels::GgmlType::kF32;
  uint64_t offset = 0;            // from the start of the data section, a multiple of the alignment
  int64_t num_elements = 0;       // product of dims
  uint64_t num_bytes = 0;         // bytes of data, verified to lie inside the file
  const uint8_t* data = nullptr;  // num_bytes bytes inside the mapping

  int64_t cols() const { return dims.empty() ? 1 : dims[0]; }
  int64_t rows() const { return dims.empty() ? 0 : num_elements / dims[0]; }
};

// One metadata entry; internal bookkeeping exposed only through GgufFile's getters.
struct GgufMetadataValue {
  GgufValueType type = GgufValueType::kUint8;
  GgufValueType element_type = GgufValueType::kUint8;  // arrays only
  uint64_t count = 0;                                  // arrays only
  const uint8_t* bytes = nullptr;         // scalar value or first array element, inside the file
  std::string_view string_value;          // kString only
  std::vector<std::string_view> strings;  // arrays of strings only
};

class GgufFile {
 public:
  // Maps `path` read-only and parses it. Errors: NotFound / PermissionDenied
  // when the file cannot be opened; InvalidArgument when it is not a valid GGUF
  // v2/v3 file (message names the key or tensor at fault, and the offset);
  // Unimplemented for a tensor type splitspec does not support (names the
  // tensor and the type number). On error nothing stays mapped.
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);

  // Parses a file image held in memory (tests, in-memory models). Takes ownership.
  // Same validation and errors as Open().
  static absl::StatusOr<std::unique_ptr<GgufFile>> FromBuffer(std::vector<uint8_t> bytes);

  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t file_size() const { return size_; }
  const std::string& path() const { return path_; }  // "<memory>" for FromBuffer

  // --- metadata ---
  bool HasKey(std::string_view key) const {
    return metadata_.contains(absl::string_view(key.data(), key.size()));
  }
  // NotFound naming the key if absent.
  absl::StatusOr<GgufValueType> GetType(std::string_view key) const;
  // Keys in file order.
  const std::vector<std::string>& keys() const { return keys_; }

  // Exact-type getters: NotFound if the key is absent, InvalidArgument naming the
  // key, the stored type and the requested type if the types differ.
  absl::StatusOr<uint8_t> GetUint8(std::string_view key) const;
  absl::StatusOr<int8_t> GetInt8(std::string_view key) const;
  absl::StatusOr<uint16_t> GetUint16(std::string_view key) const;
  absl::StatusOr<int16_t> GetInt16(std::string_view key) const;
  absl::StatusOr<uint32_t> GetUint32(std::string_view key) const;
  absl::StatusOr<int32_t> GetInt32(std::string_view key) const;
  absl::StatusOr<uint64_t> GetUint64(std::string_view key) const;
  absl::StatusOr<int64_t> GetInt64(std::string_view key) const;
  absl::StatusOr<float> GetFloat32(std::string_view key) const;
  absl::StatusOr<double> GetFloat64(std::string_view key) const;
  absl::StatusOr<bool> GetBool(std::string_view key) const;
  absl::StatusOr<std::string_view> GetString(std::string_view key) const;

  // Lenient getters for values whose integer width varies between writers:
  // any integer type, converted; InvalidArgument naming the key if the value is
  // not an integer or does not fit in int64.
  absl::StatusOr<int64_t> GetInteger(std::string_view key) const;
  // f32 or f64 (also accepts an integer), as double.
  absl::StatusOr<double> GetNumber(std::string_view key) const;

  // Arrays. NotFound if absent; InvalidArgument naming the key if the value is
  // not an array or its elements have the wrong type.
  absl::StatusOr<GgufValueType> GetArrayElementType(std::string_view key) const;
  absl::StatusOr<uint64_t> GetArrayLength(std::string_view key) const;
  // Views into the file, valid while the GgufFile lives.
  absl::StatusOr<absl::Span<const std::string_view>> GetStringArray(std::string_view key) const;
  // Copies (array data in GGUF metadata is not aligned).
  absl::StatusOr<std::vector<float>> GetFloat32Array(std::string_view key) const;
  absl::StatusOr<std::vector<int32_t>> GetInt32Array(std::string_view key) const;
  // Any integer element type, converted; InvalidArgument if an element does not fit.
  absl::StatusOr<std::vector<int64_t>> GetIntegerArray(std::string_view key) const;
  absl::StatusOr<std::vector<bool>> GetBoolArray(std::string_view key) const;

  // --- tensors ---
  // In file order.
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  // nullptr if absent.
  const GgufTensorInfo* FindTensor(std::string_view name) const;
  // NotFound naming the tensor if absent.
  absl::StatusOr<const GgufTensorInfo*> GetTensor(std::string_view name) const;

 private:
  GgufFile() = default;
  static absl::StatusOr<std::unique_ptr<GgufFile>> Parse(std::unique_ptr<GgufFile> file);
  absl::StatusOr<const GgufMetadataValue*> Find(std::string_view key) const;
  absl::StatusOr<const GgufMetadataValue*> FindTyped(std::string_view key,
                                                     GgufValueType type) const;
  absl::StatusOr<const GgufMetadataValue*> FindArray(std::string_view key,
                                                     GgufValueType element_type) const;

  std::string path_;
  const uint8_t* base_ = nullptr;  // the whole file
  uint64_t size_ = 0;
  void* mapping_ = nullptr;      // mmap'ed region (nullptr for buffers)
  std::vector<uint8_t> buffer_;  // owned image (FromBuffer)
  uint32_t version_ = 0;
  uint64_t alignment_ = kGgufDefaultAlignment;
  std::vector<std::string> keys_;
  absl::flat_hash_map<std::string, GgufMetadataValue> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  absl::flat_hash_map<std::string, size_t> tensor_index_;
};

}  // namespace splitspec::model

#endif  // SPLITSPEC_RUNTIME_MODEL_GGUF_READER_H_
