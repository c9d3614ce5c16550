// Builds the Register message a worker sends to the coordinator: role, name,
// host, pid, capabilities, and the fingerprint of its model file.
#ifndef SPLITSPEC_RUNTIME_NET_WORKER_IDENTITY_H_
#define SPLITSPEC_RUNTIME_NET_WORKER_IDENTITY_H_

#include <string>

#include "absl/status/statusor.h"
#include "proto/splitspec.pb.h"

namespace splitspec::net {

struct WorkerIdentity {
  proto::Role role = proto::ROLE_UNSPECIFIED;
  std::string name;           // required, e.g. "draft-0"
  std::string model_path;     // optional; fingerprinted when set
  std::string data_endpoint;  // where the worker serves data-plane traffic
  std::string tp_group;       // target workers
  int tp_rank = 0;
  int tp_size = 1;
  int threads = 1;
};

// The identity a draft worker uses on a target leader's data channel, so the
// target can address results to the draft worker the coordinator assigned.
std::string DraftPeerName(uint64_t draft_worker_id);

// Errors: InvalidArgument naming the field (empty name, bad role, tp_rank out
// of range); the model file's open/read error if it cannot be fingerprinted.
absl::StatusOr<proto::Register> BuildRegistration(const WorkerIdentity& identity);

}  // namespace splitspec::net

#endif  // SPLITSPEC_RUNTIME_NET_WORKER_IDENTITY_H_
