#include "target_worker/single_rank_model.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"

#if defined(SPLITSPEC_HAVE_NCCL)
#include "runtime/dist/file_rendezvous_store.h"
#include "runtime/dist/nccl_communicator.h"
#endif

namespace splitspec::target {
namespace {

#if defined(SPLITSPEC_HAVE_NCCL)
absl::StatusOr<std::unique_ptr<net::Communicator>> OneRankNcclGroup(int device) {
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/splitspec-nccl-",
                                 ::getpid(), "-XXXXXX");
  if (::mkdtemp(dir.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("cannot make the NCCL rendezvous directory ", dir));
  }
  absl::StatusOr<std::unique_ptr<net::Communicator>> group =
      [&]() -> absl::StatusOr<std::unique_ptr<net::Communicator>> {
    ASSIGN_OR_RETURN(std::unique_ptr<net::FileRendezvousStore> store,
                     net::FileRendezvousStore::Open(dir));
    ASSIGN_OR_RETURN(std::unique_ptr<net::NcclCommunicator> nccl,
                     net::NcclCommunicator::Create(
                         *store, {.group = "target", .rank = 0, .size = 1}, {.device = device}));
    return std::unique_ptr<net::Communicator>(std::move(nccl));
  }();
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return group;
}
#endif

}  // namespace

absl::StatusOr<SingleRankModel> LoadSingleRankModel(const std::string& path,
                                                    const model::TransformerOptions& options) {
  SingleRankModel loaded;
#if defined(SPLITSPEC_HAVE_NCCL)
  if (options.device.is_cuda()) {
    // The device is checked first, so that a missing GPU is named as such, not as an NCCL error.
    RETURN_IF_ERROR(model::CheckDeviceExists(options.device, model::SystemDeviceProbe()));
    ASSIGN_OR_RETURN(loaded.group, OneRankNcclGroup(options.device.ordinal));
  }
#endif
  ASSIGN_OR_RETURN(loaded.model, model::Transformer::Load(path, loaded.group.get(), options));
  return loaded;
}

}  // namespace splitspec::target
