#include "runtime/net/worker_identity.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/cpu_features.h"
#include "runtime/base/file_fingerprint.h"
#include "runtime/base/file_path.h"
#include "runtime/base/status_macros.h"

namespace splitspec::net {
namespace {

std::string HostName() {
  char buffer[256] = {};
  if (gethostname(buffer, sizeof(buffer) - 1) != 0) return "unknown";
  return buffer;
}

}  // namespace

std::string DraftPeerName(uint64_t draft_worker_id) {
  return absl::StrCat("draft-", draft_worker_id);
}

absl::StatusOr<proto::Register> BuildRegistration(const WorkerIdentity& identity) {
  if (identity.name.empty()) return absl::InvalidArgumentError("worker name must not be empty");
  if (identity.role != proto::ROLE_DRAFT_WORKER && identity.role != proto::ROLE_TARGET_WORKER) {
    return absl::InvalidArgumentError(
        absl::StrCat("role ", proto::Role_Name(identity.role), " is not a worker role"));
  }
  if (identity.tp_size < 1 || identity.tp_rank < 0 || identity.tp_rank >= identity.tp_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("tp_rank ", identity.tp_rank, " is outside tp_size ", identity.tp_size));
  }
  proto::Register registration;
  registration.set_role(identity.role);
  registration.set_worker_name(identity.name);
  registration.set_host(HostName());
  registration.set_pid(static_cast<uint32_t>(getpid()));
  registration.set_data_endpoint(identity.data_endpoint);
  registration.set_tp_group(identity.tp_group);
  registration.set_tp_rank(identity.tp_rank);
  registration.set_tp_size(identity.tp_size);
  proto::Capabilities* caps = registration.mutable_capabilities();
  caps->set_device("cpu");
  caps->set_cpu_isa(kernels::CpuIsaName());
  caps->set_threads(identity.threads);
  if (!identity.model_path.empty()) {
    ASSIGN_OR_RETURN(FileFingerprint fingerprint, FingerprintFile(identity.model_path));
    proto::ModelFingerprint* model = registration.mutable_model();
    model->set_name(BaseName(identity.model_path));
    model->set_content_hash(fingerprint.fnv1a64);
    model->set_file_bytes(fingerprint.bytes);
  }
  return registration;
}

}  // namespace splitspec::net
