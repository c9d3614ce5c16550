// Status propagation macros used across splitspec.
//
// Debian's Abseil (20220623) ships absl::Status and absl::StatusOr but not the
// RETURN_IF_ERROR / ASSIGN_OR_RETURN macros, so they are defined once here.
//
//   absl::StatusOr<Model> LoadModel(const std::string& path) {
//     ASSIGN_OR_RETURN(GgufFile file, GgufFile::Open(path));
//     RETURN_IF_ERROR(file.Validate());
//     ...
//   }
#ifndef SPLITSPEC_RUNTIME_BASE_STATUS_MACROS_H_
#define SPLITSPEC_RUNTIME_BASE_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define SPLITSPEC_STATUS_CONCAT_INNER_(a, b) a##b
#define SPLITSPEC_STATUS_CONCAT_(a, b) SPLITSPEC_STATUS_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status) and returns it from the enclosing function if not OK.
#define RETURN_IF_ERROR(expr)                              \
  do {                                                     \
    ::absl::Status splitspec_status_ = (expr);             \
    if (!splitspec_status_.ok()) return splitspec_status_; \
  } while (0)

// Evaluates `rexpr` (an absl::StatusOr<T>); on error returns its status, otherwise
// move-assigns the value to `lhs` (which may be a declaration: `ASSIGN_OR_RETURN(auto x, F())`).
#define ASSIGN_OR_RETURN(lhs, rexpr)                                                             \
  SPLITSPEC_ASSIGN_OR_RETURN_IMPL_(SPLITSPEC_STATUS_CONCAT_(splitspec_statusor_, __LINE__), lhs, \
                                   rexpr)

#define SPLITSPEC_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                     \
  if (!tmp.ok()) return std::move(tmp).status();          \
  lhs = std::move(tmp).value()

#endif  // SPLITSPEC_RUNTIME_BASE_STATUS_MACROS_H_
