#include "tools/default_paths.h"

#include <cstdlib>
#include <filesystem>

namespace splitspec::tools {

std::string BinaryDirectory() {
  std::error_code error;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? std::string(".") : exe.parent_path().string();
}

std::string RepositoryRoot() {
  const std::filesystem::path root = std::filesystem::path(BinaryDirectory()) / ".." / ".." / "..";
  std::error_code error;
  if (std::filesystem::exists(root / "CMakeLists.txt", error)) {
    return std::filesystem::weakly_canonical(root, error).string();
  }
  return std::filesystem::current_path(error).string();
}

std::string DefaultModelPath() {
  if (const char* env = std::getenv("SPLITSPEC_MODEL")) return env;
  return RepositoryRoot() + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

}  // namespace splitspec::tools
