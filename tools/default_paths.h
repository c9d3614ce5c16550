// Where the CLI finds its sibling binaries, the repository, and the default model.
#ifndef SPLITSPEC_TOOLS_DEFAULT_PATHS_H_
#define SPLITSPEC_TOOLS_DEFAULT_PATHS_H_

#include <string>

namespace splitspec::tools {

// The folder of the running executable (from /proc/self/exe).
std::string BinaryDirectory();
// The checkout the binary was built in: BinaryDirectory()/../../.. for
// build/<preset>/bin, else the current directory.
std::string RepositoryRoot();
// $SPLITSPEC_MODEL if set, else RepositoryRoot()/models/SmolLM2-135M-Instruct.Q4_1.gguf.
std::string DefaultModelPath();

}  // namespace splitspec::tools

#endif  // SPLITSPEC_TOOLS_DEFAULT_PATHS_H_
