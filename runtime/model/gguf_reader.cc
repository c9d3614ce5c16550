#include "runtime/model/gguf_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"

namespace splitspec::model {
namespace {

// Debian's Abseil has its own string_view type; the public API uses std::string_view.
absl::string_view AV(std::string_view s) { return absl::string_view(s.data(), s.size()); }
absl::string_view AV(absl::string_view s) { return s; }

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as little-endian u32
// Smallest possible encodings, used to refuse counts before allocating.
constexpr uint64_t kMinKeyValueBytes = 8 + 4;            // empty key + type
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;  // empty name, n_dims, type, offset
// Refuse absurd strings even when the file is big enough (a key or token this long is corrupt).
constexpr uint64_t kMaxStringBytes = uint64_t{1} << 30;

// Bytes of one element of a fixed-size value type; 0 for string/array.
uint64_t FixedSize(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
      return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32:
      return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64:
      return 8;
    case GgufValueType::kString:
    case GgufValueType::kArray:
      return 0;
  }
  return 0;
}

bool IsKnownType(uint32_t raw) { return raw <= static_cast<uint32_t>(GgufValueType::kFloat64); }

template <typename T>
T LoadUnaligned(const uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

// Bounds-checked sequential reader over the file image. Every read either
// succeeds entirely inside [0, size) or returns an error naming `what`.
class Cursor {
 public:
  Cursor(const uint8_t* base, uint64_t size) : base_(base), size_(size) {}

  uint64_t offset() const { return offset_; }
  uint64_t remaining() const { return size_ - offset_; }

  absl::StatusOr<const uint8_t*> Take(uint64_t n, absl::string_view what) {
    if (n > remaining()) {
      return absl::InvalidArgumentError(absl::StrCat("GGUF truncated: ", what, " needs ", n,
                                                     " bytes at offset ", offset_, " but only ",
                                                     remaining(), " remain"));
    }
    const uint8_t* p = base_ + offset_;
    offset_ += n;
    return p;
  }

  template <typename T>
  absl::StatusOr<T> Read(absl::string_view what) {
    ASSIGN_OR_RETURN(const uint8_t* p, Take(sizeof(T), what));
    return LoadUnaligned<T>(p);
  }

  absl::StatusOr<std::string_view> ReadString(absl::string_view what) {
    ASSIGN_OR_RETURN(uint64_t length, Read<uint64_t>(what));
    if (length > kMaxStringBytes) {
      return absl::InvalidArgumentError(absl::StrCat("GGUF ", what, ": string length ", length,
                                                     " at offset ", offset_ - 8,
                                                     " is implausibly large"));
    }
    ASSIGN_OR_RETURN(const uint8_t* p, Take(length, what));
    return std::string_view(reinterpret_cast<const char*>(p), length);
  }

 private:
  const uint8_t* base_;
  uint64_t size_;
  uint64_t offset_ = 0;
};

absl::StatusOr<GgufValueType> ReadValueType(Cursor& cursor, absl::string_view key) {
  ASSIGN_OR_RETURN(uint32_t raw,
                   cursor.Read<uint32_t>(absl::StrCat("type of key '", AV(key), "'")));
  if (!IsKnownType(raw)) {
    return absl::InvalidArgumentError(absl::StrCat("GGUF key '", AV(key), "': unknown value type ",
                                                   raw, " at offset ", cursor.offset() - 4));
  }
  return static_cast<GgufValueType>(raw);
}

absl::Status ReadArray(Cursor& cursor, absl::string_view key, GgufMetadataValue& value) {
  ASSIGN_OR_RETURN(value.element_type, ReadValueType(cursor, key));
  if (value.element_type == GgufValueType::kArray) {
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF key '", AV(key), "': nested arrays are not supported"));
  }
  ASSIGN_OR_RETURN(value.count,
                   cursor.Read<uint64_t>(absl::StrCat("array length of key '", AV(key), "'")));
  const uint64_t element_bytes = FixedSize(value.element_type);
  // A string element takes at least its 8-byte length.
  const uint64_t min_bytes = element_bytes == 0 ? 8 : element_bytes;
  if (value.count > cursor.remaining() / min_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF key '", AV(key), "': array of ", value.count, " ",
                     GgufValueTypeName(value.element_type), " elements at offset ", cursor.offset(),
                     " does not fit in the ", cursor.remaining(), " bytes left in the file"));
  }
  value.bytes = nullptr;
  if (element_bytes != 0) {
    ASSIGN_OR_RETURN(value.bytes, cursor.Take(value.count * element_bytes,
                                              absl::StrCat("array of key '", AV(key), "'")));
    return absl::OkStatus();
  }
  value.strings.reserve(value.count);
  for (uint64_t i = 0; i < value.count; ++i) {
    ASSIGN_OR_RETURN(std::string_view s,
                     cursor.ReadString(absl::StrCat("element ", i, " of key '", AV(key), "'")));
    value.strings.push_back(s);
  }
  return absl::OkStatus();
}

absl::StatusOr<GgufMetadataValue> ReadValue(Cursor& cursor, absl::string_view key) {
  GgufMetadataValue value;
  ASSIGN_OR_RETURN(value.type, ReadValueType(cursor, key));
  if (value.type == GgufValueType::kArray) {
    RETURN_IF_ERROR(ReadArray(cursor, key, value));
  } else if (value.type == GgufValueType::kString) {
    ASSIGN_OR_RETURN(value.string_value,
                     cursor.ReadString(absl::StrCat("value of key '", AV(key), "'")));
  } else {
    ASSIGN_OR_RETURN(value.bytes, cursor.Take(FixedSize(value.type),
                                              absl::StrCat("value of key '", AV(key), "'")));
  }
  return value;
}

// Reads one tensor info (everything but the data pointer).
absl::StatusOr<GgufTensorInfo> ReadTensorInfo(Cursor& cursor, uint64_t index) {
  GgufTensorInfo info;
  ASSIGN_OR_RETURN(std::string_view name,
                   cursor.ReadString(absl::StrCat("name of tensor #", index)));
  info.name = std::string(name);
  const std::string where = absl::StrCat("tensor '", info.name, "'");
  ASSIGN_OR_RETURN(uint32_t n_dims, cursor.Read<uint32_t>(absl::StrCat("n_dims of ", where)));
  if (n_dims == 0 || n_dims > kGgufMaxDims) {
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF ", where, ": ", n_dims, " dimensions (1..", kGgufMaxDims, " allowed)"));
  }
  int64_t elements = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    ASSIGN_OR_RETURN(uint64_t dim, cursor.Read<uint64_t>(absl::StrCat("dims of ", where)));
    if (dim == 0 || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        static_cast<int64_t>(dim) > std::numeric_limits<int64_t>::max() / elements) {
      return absl::InvalidArgumentError(
          absl::StrCat("GGUF ", where, ": dimension ", d, " = ", dim, " is zero or overflows"));
    }
    elements *= static_cast<int64_t>(dim);
    info.dims.push_back(static_cast<int64_t>(dim));
  }
  info.num_elements = elements;
  ASSIGN_OR_RETURN(uint32_t raw_type, cursor.Read<uint32_t>(absl::StrCat("type of ", where)));
  const kernels::GgmlTypeTraits* traits = kernels::LookupGgmlType(raw_type);
  if (traits == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat("GGUF ", where, ": tensor type ", raw_type, " is not supported"));
  }
  info.type = traits->type;
  if (info.dims[0] % traits->block_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat("GGUF ", where, ": row length ", info.dims[0],
                                                   " is not a multiple of the ", traits->name,
                                                   " block size ", traits->block_size));
  }
  const uint64_t blocks = static_cast<uint64_t>(elements / traits->block_size);
  if (blocks > std::numeric_limits<uint64_t>::max() / traits->block_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("GGUF ", where, ": byte size overflows"));
  }
  info.num_bytes = blocks * traits->block_bytes;
  ASSIGN_OR_RETURN(info.offset, cursor.Read<uint64_t>(absl::StrCat("offset of ", where)));
  return info;
}

}  // namespace

const char* GgufValueTypeName(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
      return "u8";
    case GgufValueType::kInt8:
      return "i8";
    case GgufValueType::kUint16:
      return "u16";
    case GgufValueType::kInt16:
      return "i16";
    case GgufValueType::kUint32:
      return "u32";
    case GgufValueType::kInt32:
      return "i32";
    case GgufValueType::kFloat32:
      return "f32";
    case GgufValueType::kBool:
      return "bool";
    case GgufValueType::kString:
      return "string";
    case GgufValueType::kArray:
      return "array";
    case GgufValueType::kUint64:
      return "u64";
    case GgufValueType::kInt64:
      return "i64";
    case GgufValueType::kFloat64:
      return "f64";
  }
  return "unknown";
}

GgufFile::~GgufFile() {
  if (mapping_ != nullptr) munmap(mapping_, size_);
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    const std::string message = absl::StrCat("cannot open GGUF '", path, "': ", strerror(err));
    if (err == ENOENT) return absl::NotFoundError(message);
    if (err == EACCES) return absl::PermissionDeniedError(message);
    return absl::UnavailableError(message);
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat("GGUF '", path, "' is not a regular file"));
  }
  auto file = std::unique_ptr<GgufFile>(new GgufFile());
  file->path_ = path;
  file->size_ = static_cast<uint64_t>(st.st_size);
  if (file->size_ > 0) {
    void* p = mmap(nullptr, file->size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      close(fd);
      return absl::UnavailableError(absl::StrCat("cannot mmap GGUF '", path, "': ", strerror(err)));
    }
    file->mapping_ = p;
    file->base_ = static_cast<const uint8_t*>(p);
  }
  close(fd);  // the mapping stays valid
  return Parse(std::move(file));
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::FromBuffer(std::vector<uint8_t> bytes) {
  auto file = std::unique_ptr<GgufFile>(new GgufFile());
  file->path_ = "<memory>";
  file->buffer_ = std::move(bytes);
  file->base_ = file->buffer_.data();
  file->size_ = file->buffer_.size();
  return Parse(std::move(file));
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Parse(std::unique_ptr<GgufFile> file) {
  Cursor cursor(file->base_, file->size_);
  ASSIGN_OR_RETURN(uint32_t magic, cursor.Read<uint32_t>("magic"));
  if (magic != kGgufMagic) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", file->path_, "' is not a GGUF file (bad magic)"));
  }
  ASSIGN_OR_RETURN(file->version_, cursor.Read<uint32_t>("version"));
  if (file->version_ != 2 && file->version_ != 3) {
    return absl::UnimplementedError(
        absl::StrCat("GGUF version ", file->version_, " is not supported (2 and 3 are)"));
  }
  ASSIGN_OR_RETURN(uint64_t tensor_count, cursor.Read<uint64_t>("tensor count"));
  ASSIGN_OR_RETURN(uint64_t kv_count, cursor.Read<uint64_t>("metadata count"));
  if (kv_count > cursor.remaining() / kMinKeyValueBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF metadata count ", kv_count, " does not fit in the file"));
  }
  if (tensor_count > cursor.remaining() / kMinTensorInfoBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF tensor count ", tensor_count, " does not fit in the file"));
  }
  for (uint64_t i = 0; i < kv_count; ++i) {
    ASSIGN_OR_RETURN(std::string_view key, cursor.ReadString(absl::StrCat("key #", i)));
    ASSIGN_OR_RETURN(GgufMetadataValue value, ReadValue(cursor, AV(key)));
    if (file->metadata_.contains(AV(key))) {
      return absl::InvalidArgumentError(absl::StrCat("GGUF key '", AV(key), "' appears twice"));
    }
    file->keys_.emplace_back(key);
    file->metadata_.emplace(std::string(key), std::move(value));
  }
  if (file->HasKey("general.alignment")) {
    ASSIGN_OR_RETURN(uint32_t alignment, file->GetUint32("general.alignment"));
    if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("GGUF key 'general.alignment' = ", alignment, " is not a power of two"));
    }
    file->alignment_ = alignment;
  }
  file->tensors_.reserve(tensor_count);
  for (uint64_t i = 0; i < tensor_count; ++i) {
    ASSIGN_OR_RETURN(GgufTensorInfo info, ReadTensorInfo(cursor, i));
    if (file->tensor_index_.contains(info.name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("GGUF tensor '", info.name, "' appears twice"));
    }
    file->tensor_index_.emplace(info.name, file->tensors_.size());
    file->tensors_.push_back(std::move(info));
  }
  // The data section starts at the next multiple of the alignment.
  const uint64_t header_end = cursor.offset();
  const uint64_t data_start =
      (header_end + file->alignment_ - 1) / file->alignment_ * file->alignment_;
  for (GgufTensorInfo& t : file->tensors_) {
    const std::string where = absl::StrCat("GGUF tensor '", t.name, "'");
    if (t.offset % file->alignment_ != 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": data offset ", t.offset,
                                                     " is not a multiple of the alignment ",
                                                     file->alignment_));
    }
    if (data_start > file->size_ || t.offset > file->size_ - data_start ||
        t.num_bytes > file->size_ - data_start - t.offset) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": data [", t.offset, ", +", t.num_bytes, ") past the data section start ",
          data_start, " runs past the end of the file (", file->size_, " bytes)"));
    }
    t.data = file->base_ + data_start + t.offset;
  }
  return file;
}

// --- metadata lookup ---

absl::StatusOr<const GgufMetadataValue*> GgufFile::Find(std::string_view key) const {
  auto it = metadata_.find(AV(key));
  if (it == metadata_.end()) {
    return absl::NotFoundError(absl::StrCat("GGUF key '", AV(key), "' not found in ", path_));
  }
  return &it->second;
}

absl::StatusOr<const GgufMetadataValue*> GgufFile::FindTyped(std::string_view key,
                                                             GgufValueType type) const {
  ASSIGN_OR_RETURN(const GgufMetadataValue* value, Find(key));
  if (value->type != type) {
    return absl::InvalidArgumentError(absl::StrCat("GGUF key '", AV(key), "' has type ",
                                                   GgufValueTypeName(value->type), ", expected ",
                                                   GgufValueTypeName(type)));
  }
  return value;
}

absl::StatusOr<const GgufMetadataValue*> GgufFile::FindArray(std::string_view key,
                                                             GgufValueType element_type) const {
  ASSIGN_OR_RETURN(const GgufMetadataValue* value, FindTyped(key, GgufValueType::kArray));
  if (value->element_type != element_type) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GGUF key '", AV(key), "' is an array of ", GgufValueTypeName(value->element_type),
        ", expected an array of ", GgufValueTypeName(element_type)));
  }
  return value;
}

absl::StatusOr<GgufValueType> GgufFile::GetType(std::string_view key) const {
  ASSIGN_OR_RETURN(const GgufMetadataValue* value, Find(key));
  return value->type;
}

#define SPLITSPEC_GGUF_SCALAR_GETTER(Name, CType, Enum)                                    \
  absl::StatusOr<CType> GgufFile::Get##Name(std::string_view key) const {                  \
    ASSIGN_OR_RETURN(const GgufMetadataValue* value, FindTyped(key, GgufValueType::Enum)); \
    return LoadUnaligned<CType>(value->bytes);                                             \
  }
SPLITSPEC_GGUF_SCALAR_GETTER(Uint8, uint8_t, kUint8)
SPLITSPEC_GGUF_SCALAR_GETTER(Int8, int8_t, kInt8)
SPLITSPEC_GGUF_SCALAR_GETTER(Uint16, uint16_t, kUint16)
SPLITSPEC_GGUF_SCALAR_GETTER(Int16, int16_t, kInt16)
SPLITSPEC_GGUF_SCALAR_GETTER(Uint32, uint32_t, kUint32)
SPLITSPEC_GGUF_SCALAR_GETTER(Int32, int32_t, kInt32)
SPLITSPEC_GGUF_SCALAR_GETTER(Uint64, uint64_t, kUint64)
SPLITSPEC_GGUF_SCALAR_GETTER(Int64, int64_t, kInt64)
SPLITSPEC_GGUF_SCALAR_GETTER(Float32, float, kFloat32)
SPLITSPEC_GGUF_SCALAR_GETTER(Float64, double, kFloat64)
#undef SPLITSPEC_GGUF_SCALAR_GETTER

absl::StatusOr<bool> GgufFile::GetBool(std::string_view key) const {
  ASSIGN_OR_RETURN(const GgufMetadataValue* value, FindTyped(key, GgufValueType::kBool));
  return value->bytes[0] != 0;
}

absl::StatusOr<std::string_view> GgufFile::GetString(std::string_view key) const {
  ASSIGN_OR_RETURN(const GgufMetadataValue* value, FindTyped(key, GgufValueType::kString));
  return value->string_value;
}

namespace {

// Reads integer element `i` of a fixed-size integer type at `p`; false if not an integer type
// or an unsigned 64-bit value exceeds int64.
bool LoadInteger(GgufValueType type, const uint8_t* p, int64_t* out) {
  switch (type) {
    case GgufValueType::kUint8:
      *out = LoadUnaligned<uint8_t>(p);
      return true;
    case GgufValueType::kInt8:
      *out = LoadUnaligned<int8_t>(p);
      return true;
    case GgufValueType::kUint16:
      *out = LoadUnaligned<uint16_t>(p);
      return true;
    case GgufValueType::kInt16:
      *out = LoadUnaligned<int16_t>(p);
      return true;
    case GgufValueType::kUint32:
      *out = LoadUnaligned<uint32_t>(p);
      return true;
    case GgufValueType::kInt32:
      *out = LoadUnaligned<int32_t>(p);
      return true;
    case GgufValueType::kInt64:
      *out = LoadUnaligned<int64_t>(p);
      return true;
    case GgufValueType::kUint64: {
      const uint64_t v = LoadUnaligned<uint64_t>(p);
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
      *out = static_cast<int64_t>(v);
      return true;
    }
    default:
      return false;
  }
}

bool IsIntegerType(GgufValueType type) {
  return FixedSize(type) != 0 && type != GgufValueType::kBool && type != GgufValueType::kFloat32 &&
         type != GgufValueType::kFloat64;
}

}  // namespace

absl::StatusOr<int64_t> GgufFile::GetInteger(std::string_view key) const {
  ASSIGN_OR_RETURN(const GgufMetadataValue* value, Find(key));
  int64_t out = 0;
  if (!IsIntegerType(value->type) || !LoadInteger(value->type, value->bytes, &out)) {
    return absl::InvalidArgumentError(absl::StrCat("GGUF key '", AV(key), "' (",
                                                   GgufValueTypeName(value->type),
                                                   ") is not an integer that fits in int64"));
  }
  return out;
}

absl::StatusOr<double> GgufFile::GetNumber(std::string_view key) const {
  ASSIGN_OR_RETURN(const GgufMetadataValue* value, Find(key));
  if (value->type == GgufValueType::kFloat32) return LoadUnaligned<float>(value->bytes);
  if (value->type == GgufValueType::kFloat64) return LoadUnaligned<double>(value->bytes);
  int64_t out = 0;
  if (IsIntegerType(value->type) && LoadInteger(value->type, value->bytes, &out)) {
    return static_cast<double>(out);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "GGUF key '", AV(key), "' (", GgufValueTypeName(value->type), ") is not a number"));
}

absl::StatusOr<GgufValueType> GgufFile::GetArrayElementType(std::string_view key) const {
  ASSIGN_OR_RETURN(const GgufMetadataValue* value, FindTyped(key, GgufValueType::kArray));
  return value->element_type;
}

absl::StatusOr<uint64_t> GgufFile::GetArrayLength(std::string_view key) const {
  ASSIGN_OR_RETURN(const GgufMetadataValue* value, FindTyped(key, GgufValueType::kArray));
  return value->count;
}

absl::StatusOr<absl::Span<const std::string_view>> GgufFile::GetStringArray(
    std::string_view key) const {
  ASSIGN_OR_RETURN(const GgufMetadataValue* value, FindArray(key, GgufValueType::kString));
  return absl::MakeConstSpan(value->strings);
}

absl::StatusOr<std::vector<float>> GgufFile::GetFloat32Array(std::string_view key) const {
  ASSIGN_OR_RETURN(const GgufMetadataValue* value, FindArray(key, GgufValueType::kFloat32));
  std::vector<float> out(value->count);
  if (!out.empty()) std::memcpy(out.data(), value->bytes, value->count * sizeof(float));
  return out;
}

absl::StatusOr<std::vector<int32_t>> GgufFile::GetInt32Array(std::string_view key) const {
  ASSIGN_OR_RETURN(const GgufMetadataValue* value, FindArray(key, GgufValueType::kInt32));
  std::vector<int32_t> out(value->count);
  if (!out.empty()) std::memcpy(out.data(), value->bytes, value->count * sizeof(int32_t));
  return out;
}

absl::StatusOr<std::vector<int64_t>> GgufFile::GetIntegerArray(std::string_view key) const {
  ASSIGN_OR_RETURN(const GgufMetadataValue* value, FindTyped(key, GgufValueType::kArray));
  if (!IsIntegerType(value->element_type)) {
    return absl::InvalidArgumentError(absl::StrCat("GGUF key '", AV(key), "' is an array of ",
                                                   GgufValueTypeName(value->element_type),
                                                   ", expected integers"));
  }
  const uint64_t stride = FixedSize(value->element_type);
  std::vector<int64_t> out(value->count);
  for (uint64_t i = 0; i < value->count; ++i) {
    if (!LoadInteger(value->element_type, value->bytes + i * stride, &out[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("GGUF key '", AV(key), "': element ", i, " does not fit in int64"));
    }
  }
  return out;
}

absl::StatusOr<std::vector<bool>> GgufFile::GetBoolArray(std::string_view key) const {
  ASSIGN_OR_RETURN(const GgufMetadataValue* value, FindArray(key, GgufValueType::kBool));
  std::vector<bool> out(value->count);
  for (uint64_t i = 0; i < value->count; ++i) out[i] = value->bytes[i] != 0;
  return out;
}

// --- tensors ---

const GgufTensorInfo* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(AV(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

absl::StatusOr<const GgufTensorInfo*> GgufFile::GetTensor(std::string_view name) const {
  const GgufTensorInfo* t = FindTensor(name);
  if (t == nullptr) {
    return absl::NotFoundError(absl::StrCat("GGUF tensor '", AV(name), "' not found in ", path_));
  }
  return t;
}

}  // namespace splitspec::model
