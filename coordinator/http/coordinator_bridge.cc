#include "coordinator/http/coordinator_bridge.h"

#include <sys/eventfd.h>
#include <unistd.h>
#include <zmq.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/base/logging.h"
#include "runtime/base/status_macros.h"
#include "runtime/net/wire_format.h"

namespace splitspec::coordinator::http {
namespace {

constexpr absl::Duration kMaxWait = absl::Milliseconds(100);  // status expiry granularity

GenerationOutcome Unavailable(const std::string& message) {
  GenerationOutcome outcome;
  outcome.finish_reason = proto::FINISH_REASON_ERROR;
  outcome.error_code = proto::ERROR_CODE_UNAVAILABLE;
  outcome.error_message = message;
  return outcome;
}

// The coordinator's Error answering a DrainRequest, as a status with its code.
absl::Status DrainRefusal(const proto::Error& error) {
  const std::string message = error.message();
  switch (error.code()) {
    case proto::ERROR_CODE_INVALID_ARGUMENT:
      return absl::InvalidArgumentError(message);
    case proto::ERROR_CODE_NOT_FOUND:
      return absl::NotFoundError(message);
    case proto::ERROR_CODE_UNAVAILABLE:
      return absl::UnavailableError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace

std::string ChoiceRequestId(const std::string& request_id, int index) {
  return index == 0 ? request_id : absl::StrCat(request_id, "#", index);
}

absl::StatusOr<std::unique_ptr<CoordinatorBridge>> CoordinatorBridge::Start(
    const std::string& coordinator_endpoint, BridgeOptions options) {
  static std::atomic<int> counter{0};
  ASSIGN_OR_RETURN(std::unique_ptr<net::Channel> channel,
                   net::ConnectChannel(coordinator_endpoint,
                                       absl::StrCat("http-", getpid(), "-", counter.fetch_add(1))));
  const int wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd < 0) return absl::UnavailableError("eventfd for the coordinator bridge failed");
  std::unique_ptr<CoordinatorBridge> bridge(
      new CoordinatorBridge(std::move(channel), options, wake_fd));
  bridge->thread_ = std::thread([b = bridge.get()] { b->Loop(); });
  return bridge;
}

CoordinatorBridge::CoordinatorBridge(std::unique_ptr<net::Channel> channel, BridgeOptions options,
                                     int wake_fd)
    : options_(options), channel_(std::move(channel)), wake_fd_(wake_fd) {}

CoordinatorBridge::~CoordinatorBridge() {
  Stop();
  close(wake_fd_);
}

void CoordinatorBridge::Submit(proto::SubmitRequest submit, std::unique_ptr<GenerationSink> sink) {
  Job job{Job::kSubmit, std::move(submit), std::move(sink), {}, {}, {}, {}};
  Enqueue(std::move(job));
}

void CoordinatorBridge::Cancel(const std::string& request_id) {
  Enqueue(Job{Job::kCancel, {}, nullptr, request_id, {}, {}, {}});
}

void CoordinatorBridge::QueryStatus(StatusCallback done) {
  Enqueue(Job{Job::kStatus, {}, nullptr, {}, std::move(done), {}, {}});
}

void CoordinatorBridge::Drain(proto::DrainRequest request, DrainCallback done) {
  Enqueue(Job{Job::kDrain, {}, nullptr, {}, nullptr, std::move(request), std::move(done)});
}

void CoordinatorBridge::Enqueue(Job job) {
  {
    MutexLock lock(&mu_);
    if (stopped_) return;
    jobs_.push_back(std::move(job));
  }
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
}

void CoordinatorBridge::Stop() {
  {
    MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  stop_.store(true);
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
}

void CoordinatorBridge::Loop() {
  while (!stop_.load()) {
    Wait();
    std::vector<Job> jobs;
    {
      MutexLock lock(&mu_);
      jobs.swap(jobs_);
    }
    for (Job& job : jobs) RunJob(job);
    Receive();
    ExpireStatusQueries(false);
  }
  Shutdown();
}

// Sleeps until the coordinator sends something, a job arrives, or kMaxWait.
void CoordinatorBridge::Wait() {
  void* socket = channel_->zmq_socket_handle();
  if (socket == nullptr) {
    // Other transports (mem://) cannot be polled together with the eventfd.
    net::WaitAnyReadable({channel_.get()}, absl::Milliseconds(1));
    return;
  }
  zmq_pollitem_t items[2] = {{socket, 0, ZMQ_POLLIN, 0}, {nullptr, wake_fd_, ZMQ_POLLIN, 0}};
  zmq_poll(items, 2, absl::ToInt64Milliseconds(kMaxWait));
  if (items[1].revents & ZMQ_POLLIN) {
    uint64_t count;
    (void)!read(wake_fd_, &count, sizeof(count));
  }
}

void CoordinatorBridge::RunJob(Job& job) {
  switch (job.kind) {
    case Job::kSubmit: {
      const std::string id = job.submit.request_id();
      proto::Envelope envelope = net::NewEnvelope();
      *envelope.mutable_submit() = std::move(job.submit);
      if (absl::Status sent = channel_->Send("", envelope); !sent.ok()) {
        job.sink->OnFinished(
            Unavailable(absl::StrCat("cannot reach the coordinator: ", sent.message())));
        return;
      }
      requests_[id].sink = std::move(job.sink);
      in_flight_.fetch_add(1);
      return;
    }
    case Job::kCancel: {
      // The request, then its choices "id#i" (adjacent in the map, from "id#").
      const std::string prefix = job.request_id + "#";
      auto cancel = [&](std::map<std::string, Pending>::iterator it) {
        SendCancel(it->first);
        GenerationOutcome outcome;
        outcome.finish_reason = proto::FINISH_REASON_CANCELLED;
        it->second.sink->OnFinished(outcome);
        in_flight_.fetch_sub(1);
        return requests_.erase(it);
      };
      if (auto it = requests_.find(job.request_id); it != requests_.end()) cancel(it);
      for (auto it = requests_.lower_bound(prefix);
           it != requests_.end() && absl::StartsWith(it->first, prefix);) {
        it = cancel(it);
      }
      return;
    }
    case Job::kStatus: {
      proto::Envelope envelope = net::NewEnvelope();
      envelope.mutable_status_request();
      if (absl::Status sent = channel_->Send("", envelope); !sent.ok()) {
        job.done(
            absl::UnavailableError(absl::StrCat("cannot reach the coordinator: ", sent.message())));
        return;
      }
      status_waiters_.emplace_back(absl::Now() + options_.status_timeout, std::move(job.done));
      return;
    }
    case Job::kDrain: {
      proto::Envelope envelope = net::NewEnvelope();
      *envelope.mutable_drain_request() = std::move(job.drain);
      if (absl::Status sent = channel_->Send("", envelope); !sent.ok()) {
        job.drain_done(
            absl::UnavailableError(absl::StrCat("cannot reach the coordinator: ", sent.message())));
        return;
      }
      drain_waiters_.emplace_back(absl::Now() + options_.status_timeout, std::move(job.drain_done));
      return;
    }
  }
}

void CoordinatorBridge::Receive() {
  while (true) {
    absl::StatusOr<net::Frame> frame = channel_->Receive(absl::ZeroDuration());
    if (!frame.ok()) return;
    const proto::Envelope& envelope = frame->envelope;
    if (envelope.has_token_stream()) {
      OnTokenStream(envelope.token_stream());
    } else if (envelope.has_drain_reply() && !drain_waiters_.empty()) {
      DrainCallback done = std::move(drain_waiters_.front().second);
      drain_waiters_.pop_front();
      done(envelope.drain_reply());
    } else if (envelope.has_error() && envelope.error().request_id().empty() &&
               !drain_waiters_.empty()) {
      DrainCallback done = std::move(drain_waiters_.front().second);
      drain_waiters_.pop_front();
      done(DrainRefusal(envelope.error()));
    } else if (envelope.has_error()) {
      auto it = requests_.find(envelope.error().request_id());
      if (it == requests_.end()) {
        SPLITSPEC_LOG(WARNING) << "http bridge: coordinator error: " << envelope.error().message();
        continue;
      }
      it->second.error_code = envelope.error().code();
      it->second.error_message = envelope.error().message();
    } else if (envelope.has_status_reply() && !status_waiters_.empty()) {
      StatusCallback done = std::move(status_waiters_.front().second);
      status_waiters_.pop_front();
      done(envelope.status_reply());
    }
  }
}

void CoordinatorBridge::OnTokenStream(const proto::TokenStream& stream) {
  auto it = requests_.find(stream.request_id());
  if (it == requests_.end()) return;  // cancelled or stopped here already
  Pending& pending = it->second;
  if (stream.tokens_size() > 0) {
    if (!pending.sink->OnTokens(stream)) {
      SendCancel(stream.request_id());
      requests_.erase(it);
      in_flight_.fetch_sub(1);
      return;
    }
  }
  if (!stream.finished()) return;
  GenerationOutcome outcome;
  outcome.finish_reason = stream.finish_reason();
  outcome.stats = stream.stats();
  outcome.error_code = pending.error_code;
  outcome.error_message = pending.error_message;
  if (outcome.finish_reason == proto::FINISH_REASON_ERROR &&
      outcome.error_code == proto::ERROR_CODE_UNSPECIFIED) {
    outcome.error_code = proto::ERROR_CODE_INTERNAL;
    outcome.error_message = "the request failed without a reason from the coordinator";
  }
  pending.sink->OnFinished(outcome);
  requests_.erase(it);
  in_flight_.fetch_sub(1);
}

void CoordinatorBridge::SendCancel(const std::string& request_id) {
  proto::Envelope envelope = net::NewEnvelope();
  envelope.mutable_cancel()->set_request_id(request_id);
  envelope.mutable_cancel()->set_reason("HTTP client went away or a stop string was generated");
  if (absl::Status sent = channel_->Send("", envelope); !sent.ok()) {
    SPLITSPEC_LOG(WARNING) << "http bridge: cannot cancel " << request_id << ": " << sent.message();
  }
}

void CoordinatorBridge::ExpireStatusQueries(bool all) {
  const absl::Time now = absl::Now();
  while (!status_waiters_.empty() && (all || status_waiters_.front().first <= now)) {
    StatusCallback done = std::move(status_waiters_.front().second);
    status_waiters_.pop_front();
    done(absl::DeadlineExceededError(
        absl::StrCat("the coordinator did not answer a status query within ",
                     absl::FormatDuration(options_.status_timeout))));
  }
  while (!drain_waiters_.empty() && (all || drain_waiters_.front().first <= now)) {
    DrainCallback done = std::move(drain_waiters_.front().second);
    drain_waiters_.pop_front();
    done(absl::DeadlineExceededError(
        absl::StrCat("the coordinator did not answer a drain request within ",
                     absl::FormatDuration(options_.status_timeout))));
  }
}

void CoordinatorBridge::Shutdown() {
  std::vector<Job> jobs;
  {
    MutexLock lock(&mu_);
    jobs.swap(jobs_);
  }
  const std::string reason = "the HTTP front door is shutting down";
  for (Job& job : jobs) {
    if (job.kind == Job::kSubmit) job.sink->OnFinished(Unavailable(reason));
    if (job.kind == Job::kStatus) job.done(absl::UnavailableError(reason));
    if (job.kind == Job::kDrain) job.drain_done(absl::UnavailableError(reason));
  }
  for (auto& [id, pending] : requests_) {
    SendCancel(id);
    pending.sink->OnFinished(Unavailable(reason));
  }
  requests_.clear();
  in_flight_.store(0);
  ExpireStatusQueries(true);
}

}  // namespace splitspec::coordinator::http
