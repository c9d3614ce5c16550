#include "runtime/base/file_path.h"

#include "gtest/gtest.h"

namespace splitspec {
namespace {

TEST(BaseNameTest, TheLastComponent) {
  EXPECT_EQ(BaseName("models/SmolLM2.gguf"), "SmolLM2.gguf");
  EXPECT_EQ(BaseName("/abs/path/m.gguf"), "m.gguf");
  EXPECT_EQ(BaseName("m.gguf"), "m.gguf");
  EXPECT_EQ(BaseName("dir/"), "");
  EXPECT_EQ(BaseName(""), "");
  EXPECT_EQ(BaseName("/"), "");
}

}  // namespace
}  // namespace splitspec
