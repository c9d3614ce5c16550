// GroupDirectory: where each tensor-parallel target group can be joined.
//
// The leader (tp_rank 0) of a group announces its rendezvous store's endpoint
// and the generation of the formation it is attempting; followers look the
// group up by name (docs/architecture.md: ranks find each other through the
// coordinator, by the group name their launcher gave them). The coordinator
// only relays the address: the store itself, and the group's collectives, run
// between the ranks.
//
//   GroupDirectory groups;
//   proto::GroupInfo echo = groups.Announce(announce);     // from the leader
//   proto::GroupInfo info = groups.Lookup(lookup);          // from a follower
//   if (info.found()) ... ConnectRendezvousStore(info.rendezvous_endpoint(), ...)
//
// An announcement with a lower generation than the one recorded is stale (a
// message of an earlier formation that arrived late) and is not recorded; the
// echo then carries the recorded one. Entries are never removed: a follower
// that joins a dead leader's store fails to connect and looks up again, and a
// restarted leader announces a higher generation (it starts from the clock).
//
// Thread safety: thread-compatible (the coordinator's control thread owns it).
#ifndef SPLITSPEC_COORDINATOR_GROUP_DIRECTORY_H_
#define SPLITSPEC_COORDINATOR_GROUP_DIRECTORY_H_

#include <map>
#include <string>

#include "proto/splitspec.pb.h"

namespace splitspec::coordinator {

class GroupDirectory {
 public:
  // Records the announcement unless it is stale or malformed (empty group or
  // endpoint, tp_size < 2: found=false in the echo). `leader_key`: the CURVE
  // key it came with ("" without CURVE), handed to followers as the
  // rendezvous server's key (GroupInfo.leader_key).
  proto::GroupInfo Announce(const proto::GroupAnnounce& announce,
                            const std::string& leader_key = "");
  // found=false until a generation >= lookup.min_generation was announced.
  proto::GroupInfo Lookup(const proto::GroupLookup& lookup) const;

  int size() const { return static_cast<int>(groups_.size()); }

 private:
  std::map<std::string, proto::GroupInfo> groups_;
};

}  // namespace splitspec::coordinator

#endif  // SPLITSPEC_COORDINATOR_GROUP_DIRECTORY_H_
