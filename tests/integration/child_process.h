// Test helpers for multi-process integration tests.
#ifndef SPLITSPEC_TESTS_INTEGRATION_CHILD_PROCESS_H_
#define SPLITSPEC_TESTS_INTEGRATION_CHILD_PROCESS_H_

#include <string>

#include "runtime/base/subprocess.h"

namespace splitspec::testing {

using ChildProcess = ::splitspec::Subprocess;
using ::splitspec::ReadFileOrEmpty;

// A fresh directory under $TMPDIR (or /tmp) for one test's files.
std::string MakeTempDir(const std::string& prefix);

}  // namespace splitspec::testing

#endif  // SPLITSPEC_TESTS_INTEGRATION_CHILD_PROCESS_H_
