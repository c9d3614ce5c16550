#include "coordinator/group_directory.h"

namespace splitspec::coordinator {

proto::GroupInfo GroupDirectory::Announce(const proto::GroupAnnounce& announce,
                                          const std::string& leader_key) {
  proto::GroupInfo not_recorded;
  not_recorded.set_group(announce.group());
  if (announce.group().empty() || announce.rendezvous_endpoint().empty() ||
      announce.tp_size() < 2) {
    return not_recorded;
  }
  auto it = groups_.find(announce.group());
  if (it != groups_.end() && it->second.generation() > announce.generation()) return it->second;
  proto::GroupInfo& info = groups_[announce.group()];
  info.set_group(announce.group());
  info.set_found(true);
  info.set_rendezvous_endpoint(announce.rendezvous_endpoint());
  info.set_generation(announce.generation());
  info.set_tp_size(announce.tp_size());
  info.set_leader_key(leader_key);
  return info;
}

proto::GroupInfo GroupDirectory::Lookup(const proto::GroupLookup& lookup) const {
  auto it = groups_.find(lookup.group());
  if (it == groups_.end() || it->second.generation() < lookup.min_generation()) {
    proto::GroupInfo not_found;
    not_found.set_group(lookup.group());
    return not_found;
  }
  return it->second;
}

}  // namespace splitspec::coordinator
