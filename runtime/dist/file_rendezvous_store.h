// FileRendezvousStore: a RendezvousStore in a directory, for ranks that share a
// file system (one host in tests, or a shared mount). Gloo's FileStore does the
// work: each key is one file (named by a hash of the key), written to a
// temporary name and renamed into place, so a reader never sees half a value.
//
//   ASSIGN_OR_RETURN(auto store, FileRendezvousStore::Open("/tmp/group-a"));
//   RETURN_IF_ERROR(store->Set("rank-0", "hello"));
//
// The directory must be fresh for each rendezvous: values left by an earlier
// run with the same group name would be read as current.
#ifndef SPLITSPEC_RUNTIME_DIST_FILE_RENDEZVOUS_STORE_H_
#define SPLITSPEC_RUNTIME_DIST_FILE_RENDEZVOUS_STORE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/dist/rendezvous_store.h"

namespace gloo::rendezvous {
class FileStore;
}  // namespace gloo::rendezvous

namespace splitspec::net {

class FileRendezvousStore final : public RendezvousStore {
 public:
  // Creates `directory` (and its parents) if needed. Errors: Unavailable naming
  // the directory if it cannot be created.
  static absl::StatusOr<std::unique_ptr<FileRendezvousStore>> Open(const std::string& directory);
  ~FileRendezvousStore() override;

  absl::Status Set(const std::string& key, absl::string_view value) override;
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override;
  std::string location() const override { return "file:" + directory_; }

 private:
  FileRendezvousStore(std::string directory, std::unique_ptr<gloo::rendezvous::FileStore> store);

  std::string directory_;
  std::unique_ptr<gloo::rendezvous::FileStore> store_;
};

}  // namespace splitspec::net

#endif  // SPLITSPEC_RUNTIME_DIST_FILE_RENDEZVOUS_STORE_H_
