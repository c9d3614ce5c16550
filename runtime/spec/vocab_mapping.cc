#include "runtime/spec/vocab_mapping.h"

#include "absl/strings/str_cat.h"

namespace splitspec::spec {

absl::StatusOr<VocabMapping> ParseVocabMapping(absl::string_view name) {
  if (name == "auto") return VocabMapping::kAuto;
  if (name == "intersection") return VocabMapping::kIntersection;
  if (name == "string") return VocabMapping::kString;
  return absl::InvalidArgumentError(
      absl::StrCat("vocab mapping must be auto, intersection or string, got '", name, "'"));
}

absl::string_view VocabMappingName(VocabMapping mapping) {
  switch (mapping) {
    case VocabMapping::kAuto:
      return "auto";
    case VocabMapping::kIntersection:
      return "intersection";
    case VocabMapping::kString:
      return "string";
  }
  return "unknown";
}

VocabMapping ResolveVocabMapping(VocabMapping mapping, VerifyMode mode) {
  if (mapping != VocabMapping::kAuto) return mapping;
  return mode == VerifyMode::kRejection ? VocabMapping::kIntersection : VocabMapping::kString;
}

}  // namespace splitspec::spec
