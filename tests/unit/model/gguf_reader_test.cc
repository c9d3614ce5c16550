#include <unistd.h>

#include "runtime/model/gguf_reader.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/gguf_writer.h"

namespace splitspec::model {
namespace {

using kernels::GgmlType;
using ::testing::HasSubstr;

std::vector<uint8_t> FloatBytes(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(float));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// A small file with every metadata kind and two tensors; the last tensor's data
// ends exactly at the end of the file (32 bytes, no trailing padding).
GgufWriter SampleWriter() {
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  w.SetUint8("u8", 200);
  w.SetInt8("i8", -100);
  w.SetUint16("u16", 60000);
  w.SetInt16("i16", -30000);
  w.SetUint32("u32", 4000000000u);
  w.SetInt32("i32", -2000000000);
  w.SetUint64("u64", 18000000000000000000ull);
  w.SetInt64("i64", -9000000000000000000ll);
  w.SetFloat32("f32", 1.5f);
  w.SetFloat64("f64", -2.25);
  w.SetBool("flag", true);
  w.SetStringArray("tokens", {"<s>", "", "hello world", "\xc4\xa0x"});
  w.SetFloat32Array("scores", std::vector<float>{0.5f, -1.0f});
  w.SetInt32Array("types", std::vector<int32_t>{1, 3, -7});
  std::vector<float> a(64 * 2);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i) * 0.25f;
  EXPECT_TRUE(w.AddTensor("a.weight", {64, 2}, GgmlType::kF32, FloatBytes(a)).ok());
  std::vector<float> b(8, 3.0f);
  EXPECT_TRUE(w.AddTensor("b.weight", {8}, GgmlType::kF32, FloatBytes(b)).ok());
  return w;
}

TEST(GgufReaderTest, ReadsEveryScalarType) {
  auto file = GgufFile::FromBuffer(SampleWriter().Serialize());
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufFile& f = **file;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(*f.GetString("general.architecture"), "llama");
  EXPECT_EQ(*f.GetUint8("u8"), 200);
  EXPECT_EQ(*f.GetInt8("i8"), -100);
  EXPECT_EQ(*f.GetUint16("u16"), 60000);
  EXPECT_EQ(*f.GetInt16("i16"), -30000);
  EXPECT_EQ(*f.GetUint32("u32"), 4000000000u);
  EXPECT_EQ(*f.GetInt32("i32"), -2000000000);
  EXPECT_EQ(*f.GetUint64("u64"), 18000000000000000000ull);
  EXPECT_EQ(*f.GetInt64("i64"), -9000000000000000000ll);
  EXPECT_EQ(*f.GetFloat32("f32"), 1.5f);
  EXPECT_EQ(*f.GetFloat64("f64"), -2.25);
  EXPECT_EQ(*f.GetBool("flag"), true);
  EXPECT_EQ(*f.GetInteger("u32"), 4000000000ll);
  EXPECT_EQ(*f.GetNumber("f32"), 1.5);
  EXPECT_EQ(f.keys().front(), "general.architecture");
}

TEST(GgufReaderTest, ReadsArrays) {
  auto file = GgufFile::FromBuffer(SampleWriter().Serialize());
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufFile& f = **file;
  auto tokens = f.GetStringArray("tokens");
  ASSERT_TRUE(tokens.ok());
  ASSERT_EQ(tokens->size(), 4u);
  EXPECT_EQ((*tokens)[0], "<s>");
  EXPECT_EQ((*tokens)[1], "");
  EXPECT_EQ((*tokens)[2], "hello world");
  EXPECT_EQ((*tokens)[3], "\xc4\xa0x");
  EXPECT_EQ(*f.GetFloat32Array("scores"), (std::vector<float>{0.5f, -1.0f}));
  EXPECT_EQ(*f.GetInt32Array("types"), (std::vector<int32_t>{1, 3, -7}));
  EXPECT_EQ(*f.GetIntegerArray("types"), (std::vector<int64_t>{1, 3, -7}));
  EXPECT_EQ(*f.GetArrayLength("tokens"), 4u);
  EXPECT_EQ(*f.GetArrayElementType("scores"), GgufValueType::kFloat32);
}

TEST(GgufReaderTest, WrongTypeNamesKeyAndTypes) {
  auto file = GgufFile::FromBuffer(SampleWriter().Serialize());
  ASSERT_TRUE(file.ok());
  auto v = (*file)->GetUint32("f32");
  ASSERT_FALSE(v.ok());
  EXPECT_THAT(std::string(v.status().message()), HasSubstr("'f32' has type f32, expected u32"));
  auto arr = (*file)->GetStringArray("types");
  ASSERT_FALSE(arr.ok());
  EXPECT_THAT(std::string(arr.status().message()),
              HasSubstr("'types' is an array of i32, expected an array of string"));
  auto missing = (*file)->GetString("nope.key");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("'nope.key'"));
  EXPECT_FALSE((*file)->GetInteger("f32").ok());
}

TEST(GgufReaderTest, TensorInfosAndDataPointers) {
  auto file = GgufFile::FromBuffer(SampleWriter().Serialize());
  ASSERT_TRUE(file.ok());
  const GgufFile& f = **file;
  ASSERT_EQ(f.tensors().size(), 2u);
  auto a = f.GetTensor("a.weight");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ((*a)->dims, (std::vector<int64_t>{64, 2}));
  EXPECT_EQ((*a)->cols(), 64);
  EXPECT_EQ((*a)->rows(), 2);
  EXPECT_EQ((*a)->num_bytes, 64u * 2 * 4);
  float x;
  std::memcpy(&x, (*a)->data + 4 * 77, 4);
  EXPECT_EQ(x, 77 * 0.25f);
  const GgufTensorInfo* b = f.FindTensor("b.weight");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->offset % 32, 0u);
  std::memcpy(&x, b->data + 28, 4);
  EXPECT_EQ(x, 3.0f);
  EXPECT_EQ(f.FindTensor("c.weight"), nullptr);
  EXPECT_EQ(f.GetTensor("c.weight").status().code(), absl::StatusCode::kNotFound);
}

TEST(GgufReaderTest, HonorsCustomAlignmentAndVersion2) {
  GgufWriter w = SampleWriter();
  w.set_alignment(128);
  w.set_version(2);
  auto file = GgufFile::FromBuffer(w.Serialize());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->version(), 2u);
  EXPECT_EQ((*file)->alignment(), 128u);
  EXPECT_EQ((*file)->FindTensor("b.weight")->offset % 128, 0u);
  float x;
  std::memcpy(&x, (*file)->FindTensor("b.weight")->data, 4);
  EXPECT_EQ(x, 3.0f);
}

TEST(GgufReaderTest, OpensFromDiskAndRefusesMissingFile) {
  const std::string path =
      ::testing::TempDir() + "/" + std::to_string(::getpid()) + "-gguf_reader_test.gguf";
  ASSERT_TRUE(SampleWriter().WriteFile(path).ok());
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->tensors().size(), 2u);
  EXPECT_EQ((*file)->path(), path);
  auto missing = GgufFile::Open(path + ".absent");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr(".absent"));
}

TEST(GgufReaderTest, RefusesBadMagicAndVersion) {
  std::vector<uint8_t> image = SampleWriter().Serialize();
  image[0] = 'X';
  auto bad_magic = GgufFile::FromBuffer(image);
  EXPECT_THAT(std::string(bad_magic.status().message()), HasSubstr("bad magic"));
  GgufWriter w = SampleWriter();
  w.set_version(1);
  auto v1 = GgufFile::FromBuffer(w.Serialize());
  EXPECT_EQ(v1.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(v1.status().message()), HasSubstr("version 1"));
  EXPECT_FALSE(GgufFile::FromBuffer({}).ok());
}

TEST(GgufReaderTest, RefusesEveryTruncation) {
  const std::vector<uint8_t> image = SampleWriter().Serialize();
  for (size_t n = 0; n < image.size(); ++n) {
    std::vector<uint8_t> prefix(image.begin(), image.begin() + n);
    auto file = GgufFile::FromBuffer(std::move(prefix));
    ASSERT_FALSE(file.ok()) << "prefix of " << n << " bytes was accepted";
    EXPECT_FALSE(file.status().message().empty());
  }
}

TEST(GgufReaderTest, SurvivesRandomByteFlips) {
  const std::vector<uint8_t> image = SampleWriter().Serialize();
  std::mt19937 rng(1234);
  int refused = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<uint8_t> copy = image;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < flips; ++i)
      copy[rng() % copy.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
    auto file = GgufFile::FromBuffer(std::move(copy));
    if (!file.ok()) {
      ++refused;
      continue;
    }
    // Whatever was accepted must be internally consistent.
    for (const GgufTensorInfo& t : (*file)->tensors()) {
      const uint8_t* begin = t.data;
      ASSERT_LE(t.num_bytes, (*file)->file_size());
      (void)begin;
    }
  }
  EXPECT_GT(refused, 0);
}

// Raw header helpers for hand-made hostile files.
void Put32(std::vector<uint8_t>& v, uint32_t x) {
  v.insert(v.end(), (uint8_t*)&x, (uint8_t*)&x + 4);
}
void Put64(std::vector<uint8_t>& v, uint64_t x) {
  v.insert(v.end(), (uint8_t*)&x, (uint8_t*)&x + 8);
}
void PutStr(std::vector<uint8_t>& v, const std::string& s) {
  Put64(v, s.size());
  v.insert(v.end(), s.begin(), s.end());
}
std::vector<uint8_t> Header(uint64_t tensors, uint64_t kvs) {
  std::vector<uint8_t> v = {'G', 'G', 'U', 'F'};
  Put32(v, 3);
  Put64(v, tensors);
  Put64(v, kvs);
  return v;
}

TEST(GgufReaderTest, RefusesHugeCountsBeforeAllocating) {
  std::vector<uint8_t> kv = Header(0, uint64_t{1} << 60);
  auto a = GgufFile::FromBuffer(kv);
  EXPECT_THAT(std::string(a.status().message()), HasSubstr("metadata count"));

  std::vector<uint8_t> tensors = Header(uint64_t{1} << 61, 0);
  auto b = GgufFile::FromBuffer(tensors);
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("tensor count"));

  std::vector<uint8_t> arr = Header(0, 1);
  PutStr(arr, "tokenizer.ggml.tokens");
  Put32(arr, 9);  // array
  Put32(arr, 8);  // of strings
  Put64(arr, uint64_t{1} << 62);
  arr.resize(arr.size() + 64, 0);
  auto c = GgufFile::FromBuffer(arr);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("'tokenizer.ggml.tokens': array of"));

  std::vector<uint8_t> str = Header(0, 1);
  Put64(str, uint64_t{1} << 62);  // key length
  str.resize(str.size() + 64, 'k');
  auto d = GgufFile::FromBuffer(str);
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("key #0"));

  std::vector<uint8_t> val = Header(0, 1);
  PutStr(val, "general.name");
  Put32(val, 8);
  Put64(val, 1000);  // string value longer than the file
  val.resize(val.size() + 10, 'x');
  auto e = GgufFile::FromBuffer(val);
  EXPECT_THAT(std::string(e.status().message()), HasSubstr("'general.name'"));
}

TEST(GgufReaderTest, RefusesUnknownValueTypeAndNestedArrays) {
  std::vector<uint8_t> v = Header(0, 1);
  PutStr(v, "weird");
  Put32(v, 77);
  Put32(v, 0);
  auto a = GgufFile::FromBuffer(v);
  EXPECT_THAT(std::string(a.status().message()), HasSubstr("'weird': unknown value type 77"));
  std::vector<uint8_t> n = Header(0, 1);
  PutStr(n, "nested");
  Put32(n, 9);
  Put32(n, 9);
  Put64(n, 1);
  n.resize(n.size() + 32, 0);
  auto b = GgufFile::FromBuffer(n);
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("'nested': nested arrays"));
}

// Offset of the 4-byte type field of tensor `name` in an image from SampleWriter.
size_t TypeFieldOffset(const std::vector<uint8_t>& image, const std::string& name, int n_dims) {
  const std::string needle = name;
  auto it = std::search(image.begin(), image.end(), needle.begin(), needle.end());
  EXPECT_NE(it, image.end());
  return static_cast<size_t>(it - image.begin()) + name.size() + 4 + 8 * n_dims;
}

TEST(GgufReaderTest, RefusesBadTensorFields) {
  const std::vector<uint8_t> image = SampleWriter().Serialize();
  {
    std::vector<uint8_t> copy = image;
    const uint32_t bad_type = 99;
    std::memcpy(&copy[TypeFieldOffset(copy, "b.weight", 1)], &bad_type, 4);
    auto f = GgufFile::FromBuffer(copy);
    EXPECT_EQ(f.status().code(), absl::StatusCode::kUnimplemented);
    EXPECT_THAT(std::string(f.status().message()), HasSubstr("'b.weight': tensor type 99"));
  }
  {
    std::vector<uint8_t> copy = image;
    const uint64_t bad_offset = 40;  // not a multiple of 32
    std::memcpy(&copy[TypeFieldOffset(copy, "b.weight", 1) + 4], &bad_offset, 8);
    auto f = GgufFile::FromBuffer(copy);
    EXPECT_THAT(std::string(f.status().message()), HasSubstr("'b.weight': data offset 40"));
  }
  {
    std::vector<uint8_t> copy = image;
    const uint64_t far = uint64_t{1} << 40;
    std::memcpy(&copy[TypeFieldOffset(copy, "b.weight", 1) + 4], &far, 8);
    auto f = GgufFile::FromBuffer(copy);
    EXPECT_THAT(std::string(f.status().message()), HasSubstr("'b.weight': data"));
    EXPECT_THAT(std::string(f.status().message()), HasSubstr("past the end of the file"));
  }
  {
    std::vector<uint8_t> copy = image;
    const uint64_t huge_dim = uint64_t{1} << 62;
    std::memcpy(&copy[TypeFieldOffset(copy, "a.weight", 2) - 8], &huge_dim, 8);
    auto f = GgufFile::FromBuffer(copy);
    EXPECT_THAT(std::string(f.status().message()), HasSubstr("'a.weight'"));
  }
  {
    std::vector<uint8_t> copy(image.begin(), image.end() - 4);
    auto f = GgufFile::FromBuffer(copy);
    EXPECT_THAT(std::string(f.status().message()), HasSubstr("'b.weight': data"));
  }
}

TEST(GgufReaderTest, RefusesBadAlignment) {
  GgufWriter w = SampleWriter();
  w.SetUint32("general.alignment", 48);
  auto f = GgufFile::FromBuffer(w.Serialize());
  EXPECT_THAT(std::string(f.status().message()), HasSubstr("'general.alignment' = 48"));
}

TEST(GgufReaderTest, WriterRefusesWrongByteCount) {
  GgufWriter w;
  std::vector<uint8_t> bytes(10);
  absl::Status s = w.AddTensor("t", {32}, GgmlType::kQ8_0, bytes);
  EXPECT_THAT(std::string(s.message()), HasSubstr("10 bytes given, q8_0 needs 34"));
  EXPECT_FALSE(w.AddTensor("u", {30}, GgmlType::kQ8_0, bytes).ok());
}

TEST(GgufReaderTest, OpensDefaultModelWhenPresent) {
  const std::string path =
      std::string(SPLITSPEC_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  auto file = GgufFile::Open(path);
  if (file.status().code() == absl::StatusCode::kNotFound) GTEST_SKIP() << "no default model";
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(*(*file)->GetString("general.architecture"), "llama");
  EXPECT_EQ((*(*file)->GetStringArray("tokenizer.ggml.tokens")).size(), 49152u);
  auto embd = (*file)->GetTensor("token_embd.weight");
  ASSERT_TRUE(embd.ok());
  EXPECT_EQ((*embd)->dims, (std::vector<int64_t>{576, 49152}));
}

}  // namespace
}  // namespace splitspec::model
