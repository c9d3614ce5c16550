#include "tests/testing/gguf_writer.h"

#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace splitspec::model {
namespace {

absl::string_view AV(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// resize + memcpy rather than insert: GCC 12 misreads insert into an empty vector as an
// overflow (-Wstringop-overflow), which the werror preset would turn into an error.
void AppendBytes(std::vector<uint8_t>& out, const void* p, size_t n) {
  if (n == 0) return;
  const size_t old_size = out.size();
  out.resize(old_size + n);
  std::memcpy(out.data() + old_size, p, n);
}

template <typename T>
void AppendValue(std::vector<uint8_t>& out, T v) {
  AppendBytes(out, &v, sizeof(T));
}

void AppendString(std::vector<uint8_t>& out, std::string_view s) {
  AppendValue<uint64_t>(out, s.size());
  AppendBytes(out, s.data(), s.size());
}

void PadTo(std::vector<uint8_t>& out, uint64_t alignment) {
  while (out.size() % alignment != 0) out.push_back(0);
}

uint64_t AlignUp(uint64_t n, uint64_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

}  // namespace

void GgufWriter::set_alignment(uint32_t alignment) {
  alignment_ = alignment;
  SetUint32("general.alignment", alignment);
}

void GgufWriter::SetEncoded(std::string_view key, std::vector<uint8_t> encoded) {
  for (Entry& e : entries_) {
    if (e.key == key) {
      e.encoded = std::move(encoded);
      return;
    }
  }
  entries_.push_back(Entry{std::string(key), std::move(encoded)});
}

void GgufWriter::SetScalar(std::string_view key, GgufValueType type, const void* v, size_t n) {
  std::vector<uint8_t> encoded;
  AppendValue<uint32_t>(encoded, static_cast<uint32_t>(type));
  AppendBytes(encoded, v, n);
  SetEncoded(key, std::move(encoded));
}

void GgufWriter::SetBool(std::string_view key, bool v) {
  const uint8_t byte = v ? 1 : 0;
  SetScalar(key, GgufValueType::kBool, &byte, 1);
}

void GgufWriter::SetString(std::string_view key, std::string_view v) {
  std::vector<uint8_t> encoded;
  AppendValue<uint32_t>(encoded, static_cast<uint32_t>(GgufValueType::kString));
  AppendString(encoded, v);
  SetEncoded(key, std::move(encoded));
}

void GgufWriter::SetStringArray(std::string_view key, const std::vector<std::string>& v) {
  std::vector<uint8_t> encoded;
  AppendValue<uint32_t>(encoded, static_cast<uint32_t>(GgufValueType::kArray));
  AppendValue<uint32_t>(encoded, static_cast<uint32_t>(GgufValueType::kString));
  AppendValue<uint64_t>(encoded, v.size());
  for (const std::string& s : v) AppendString(encoded, s);
  SetEncoded(key, std::move(encoded));
}

void GgufWriter::SetFloat32Array(std::string_view key, absl::Span<const float> v) {
  std::vector<uint8_t> encoded;
  AppendValue<uint32_t>(encoded, static_cast<uint32_t>(GgufValueType::kArray));
  AppendValue<uint32_t>(encoded, static_cast<uint32_t>(GgufValueType::kFloat32));
  AppendValue<uint64_t>(encoded, v.size());
  AppendBytes(encoded, v.data(), v.size() * sizeof(float));
  SetEncoded(key, std::move(encoded));
}

void GgufWriter::SetInt32Array(std::string_view key, absl::Span<const int32_t> v) {
  std::vector<uint8_t> encoded;
  AppendValue<uint32_t>(encoded, static_cast<uint32_t>(GgufValueType::kArray));
  AppendValue<uint32_t>(encoded, static_cast<uint32_t>(GgufValueType::kInt32));
  AppendValue<uint64_t>(encoded, v.size());
  AppendBytes(encoded, v.data(), v.size() * sizeof(int32_t));
  SetEncoded(key, std::move(encoded));
}

absl::Status GgufWriter::AddTensor(std::string_view name, const std::vector<int64_t>& dims,
                                   kernels::GgmlType type, absl::Span<const uint8_t> data) {
  for (const Tensor& t : tensors_) {
    if (t.name == name) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", AV(name), "' added twice"));
    }
  }
  if (dims.empty() || dims.size() > static_cast<size_t>(kGgufMaxDims)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", AV(name), "': ", dims.size(), " dims (1..4 allowed)"));
  }
  int64_t elements = 1;
  for (int64_t d : dims) {
    if (d <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", AV(name), "': dim ", d));
    }
    elements *= d;
  }
  const kernels::GgmlTypeTraits& traits = kernels::GetGgmlTypeTraits(type);
  if (dims[0] % traits.block_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", AV(name), "': row length ", dims[0],
                                                   " is not a multiple of ", traits.block_size));
  }
  const uint64_t bytes = static_cast<uint64_t>(elements / traits.block_size) * traits.block_bytes;
  if (data.size() != bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor '", AV(name), "': ", data.size(), " bytes given, ", traits.name, " needs ", bytes));
  }
  tensors_.push_back(
      Tensor{std::string(name), dims, type, std::vector<uint8_t>(data.begin(), data.end())});
  return absl::OkStatus();
}

std::vector<uint8_t> GgufWriter::Serialize() const {
  std::vector<uint8_t> out;
  AppendBytes(out, "GGUF", 4);
  AppendValue<uint32_t>(out, version_);
  AppendValue<uint64_t>(out, tensors_.size());
  AppendValue<uint64_t>(out, entries_.size());
  for (const Entry& e : entries_) {
    AppendString(out, e.key);
    AppendBytes(out, e.encoded.data(), e.encoded.size());
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    AppendString(out, t.name);
    AppendValue<uint32_t>(out, static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) AppendValue<uint64_t>(out, static_cast<uint64_t>(d));
    AppendValue<uint32_t>(out, static_cast<uint32_t>(t.type));
    AppendValue<uint64_t>(out, offset);
    offset = AlignUp(offset + t.data.size(), alignment_);
  }
  PadTo(out, alignment_);
  for (const Tensor& t : tensors_) {
    AppendBytes(out, t.data.data(), t.data.size());
    PadTo(out, alignment_);
  }
  return out;
}

absl::Status GgufWriter::WriteFile(const std::string& path) const {
  const std::vector<uint8_t> image = Serialize();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot create '", path, "': ", strerror(errno)));
  }
  const size_t written = std::fwrite(image.data(), 1, image.size(), f);
  const bool closed = std::fclose(f) == 0;
  if (written != image.size() || !closed) {
    return absl::UnavailableError(absl::StrCat("cannot write '", path, "'"));
  }
  return absl::OkStatus();
}

}  // namespace splitspec::model
