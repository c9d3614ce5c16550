#include "runtime/dist/file_rendezvous_store.h"

#include <chrono>
#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gloo/common/error.h"
#include "gloo/common/logging.h"
#include "gloo/rendezvous/file_store.h"

namespace splitspec::net {
FileRendezvousStore::FileRendezvousStore(std::string directory,
                                         std::unique_ptr<gloo::rendezvous::FileStore> store)
    : directory_(std::move(directory)), store_(std::move(store)) {}

FileRendezvousStore::~FileRendezvousStore() = default;

absl::StatusOr<std::unique_ptr<FileRendezvousStore>> FileRendezvousStore::Open(
    const std::string& directory) {
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error) {
    return absl::UnavailableError(
        absl::StrCat("rendezvous directory '", directory, "': ", error.message()));
  }
  try {
    auto store = std::make_unique<gloo::rendezvous::FileStore>(directory);
    return std::unique_ptr<FileRendezvousStore>(
        new FileRendezvousStore(directory, std::move(store)));
  } catch (const gloo::Exception& e) {
    return absl::UnavailableError(
        absl::StrCat("rendezvous directory '", directory, "': ", e.what()));
  } catch (const gloo::EnforceNotMet& e) {
    return absl::UnavailableError(
        absl::StrCat("rendezvous directory '", directory, "': ", e.what()));
  }
}

absl::Status FileRendezvousStore::Set(const std::string& key, absl::string_view value) {
  if (key.empty()) return absl::InvalidArgumentError("rendezvous key is empty");
  try {
    store_->set(key, std::vector<char>(value.begin(), value.end()));
    return absl::OkStatus();
  } catch (const gloo::Exception& e) {
    return absl::UnavailableError(
        absl::StrCat("rendezvous set of '", key, "' in ", location(), ": ", e.what()));
  } catch (const gloo::EnforceNotMet& e) {  // Gloo's FileStore checks throw this
    if (absl::StrContains(e.what(), "already exists")) {
      return absl::AlreadyExistsError(
          absl::StrCat("rendezvous key '", key, "' is already set in ", location()));
    }
    return absl::UnavailableError(
        absl::StrCat("rendezvous set of '", key, "' in ", location(), ": ", e.what()));
  }
}

absl::StatusOr<std::string> FileRendezvousStore::Get(const std::string& key,
                                                     absl::Duration timeout) {
  if (key.empty()) return absl::InvalidArgumentError("rendezvous key is empty");
  try {
    store_->wait({key}, std::chrono::milliseconds(absl::ToInt64Milliseconds(timeout)));
  } catch (const gloo::EnforceNotMet& e) {
    return absl::UnavailableError(
        absl::StrCat("rendezvous wait for '", key, "' in ", location(), ": ", e.what()));
  } catch (const gloo::Exception& e) {  // Gloo's FileStore reports a timeout this way
    return absl::DeadlineExceededError(absl::StrCat("rendezvous key '", key, "' not set in ",
                                                    location(), " within ",
                                                    absl::FormatDuration(timeout)));
  }
  try {
    const std::vector<char> value = store_->get(key);
    return std::string(value.begin(), value.end());
  } catch (const gloo::Exception& e) {
    return absl::UnavailableError(
        absl::StrCat("rendezvous get of '", key, "' in ", location(), ": ", e.what()));
  } catch (const gloo::EnforceNotMet& e) {
    return absl::UnavailableError(
        absl::StrCat("rendezvous get of '", key, "' in ", location(), ": ", e.what()));
  }
}

}  // namespace splitspec::net
