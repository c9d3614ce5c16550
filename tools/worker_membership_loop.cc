#include "tools/worker_membership_loop.h"

#include "runtime/base/logging.h"
#include "runtime/base/status_macros.h"
#include "runtime/net/membership_client.h"

namespace splitspec::tools {

absl::Status RunWorkerMembership(const WorkerFlags& flags, const std::atomic<bool>& stop) {
  ASSIGN_OR_RETURN(proto::Register registration, net::BuildRegistration(flags.identity));
  ASSIGN_OR_RETURN(std::unique_ptr<net::MembershipClient> client,
                   net::MembershipClient::Connect(flags.coordinator, registration));
  SPLITSPEC_LOG(INFO) << proto::Role_Name(registration.role()) << " '" << registration.worker_name()
                      << "' joining coordinator " << flags.coordinator;
  while (!stop.load(std::memory_order_relaxed)) {
    RETURN_IF_ERROR(client->Poll(absl::Milliseconds(50)));
  }
  SPLITSPEC_LOG(INFO) << "shutting down; deregistering worker " << client->worker_id();
  return client->Deregister("shutdown");
}

}  // namespace splitspec::tools
