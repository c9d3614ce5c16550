#include "coordinator/http/http_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/base/logging.h"

namespace splitspec::coordinator::http {

struct HttpServer::Connection {
  explicit Connection(const HttpLimits& limits) : parser(limits) {}

  // Bytes received and not yet fed to the parser (pipelined requests wait here
  // while an exchange is unfinished).
  size_t unparsed() const { return in.size() - in_parsed; }
  // True while a request has begun and is not complete.
  bool mid_request() const { return unparsed() > 0 || parser.InRequest(); }

  int fd = -1;
  std::string in;
  size_t in_parsed = 0;  // bytes of `in` already fed to the parser
  // The request being received: its parsed head, body and chunk state, kept
  // across reads so that each byte is parsed once.
  HttpRequestParser parser;
  uint64_t parser_examined = 0;  // parser.bytes_examined() already counted
  std::string out;
  ExchangeId exchange = 0;  // the unfinished exchange, 0 if none
  bool keep_alive = true;   // of the current exchange
  bool chunked = false;     // the current stream uses chunked coding
  bool close_after_write = false;
  absl::Time last_activity = absl::Now();
  absl::Time request_started = absl::InfiniteFuture();  // first byte of a pending request
  bool registered = false;                              // with epoll
  uint32_t interest = 0;                                // epoll events asked for
  uint32_t client = 0;                                  // peer IPv4 address, network order
  std::string client_text;                              // the same, dotted, for the access log
  // The current exchange, for the access log.
  std::string method = "-";
  std::string path = "-";
  std::string status = "-";
  absl::Time exchange_started = absl::Now();
};

absl::Status HttpServerOptions::Validate() const {
  if (port < 0 || port > 65535)
    return absl::InvalidArgumentError(absl::StrCat("port ", port, " outside [0, 65535]"));
  if (max_connections < 1)
    return absl::InvalidArgumentError(absl::StrCat("max_connections ", max_connections, " < 1"));
  if (max_connections_per_client < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_connections_per_client ", max_connections_per_client, " < 1"));
  }
  if (limits.max_header_bytes < 64)
    return absl::InvalidArgumentError("limits.max_header_bytes must be at least 64");
  if (request_timeout <= absl::ZeroDuration())
    return absl::InvalidArgumentError("request_timeout must be positive");
  if (idle_timeout <= absl::ZeroDuration())
    return absl::InvalidArgumentError("idle_timeout must be positive");
  if (max_output_bytes < 4096)
    return absl::InvalidArgumentError("max_output_bytes must be at least 4096");
  return absl::OkStatus();
}

HttpServer::HttpServer(const HttpServerOptions& options, HttpHandler* handler)
    : options_(options), handler_(handler) {}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                              HttpHandler* handler) {
  if (absl::Status valid = options.Validate(); !valid.ok()) return valid;
  std::unique_ptr<HttpServer> server(new HttpServer(options, handler));
  if (absl::Status listening = server->Listen(); !listening.ok()) return listening;
  server->thread_ = std::thread([s = server.get()] { s->Loop(); });
  return server;
}

HttpServer::~HttpServer() {
  stop_.store(true);
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
  }
  if (thread_.joinable()) thread_.join();
  // What was posted before the stop still goes out, as far as the sockets take
  // it without blocking: the front door ends its open streams with an error
  // event as it shuts down, and a stream must not just be cut.
  std::vector<Action> last;
  {
    MutexLock lock(&mu_);
    last.swap(outbox_);
  }
  for (Action& action : last) Apply(action);
  for (auto& slot : slots_) {
    if (slot) close(slot->fd);
  }
  for (int fd : {listen_fd_, epoll_fd_, wake_fd_}) {
    if (fd >= 0) close(fd);
  }
}

absl::Status HttpServer::Listen() {
  const std::string address = absl::StrCat(options_.host, ":", options_.port);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(options_.port));
  if (inet_pton(AF_INET, options_.host.c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("host '", options_.host, "' is not an IPv4 address"));
  }
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0)
    return absl::UnavailableError(absl::StrCat("socket() for ", address, ": ", strerror(errno)));
  const int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot bind ", address, ": ", strerror(errno)));
  }
  if (listen(listen_fd_, 128) != 0)
    return absl::UnavailableError(absl::StrCat("listen on ", address, ": ", strerror(errno)));
  socklen_t len = sizeof(addr);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || wake_fd_ < 0)
    return absl::UnavailableError(absl::StrCat("epoll/eventfd: ", strerror(errno)));
  for (int fd : {listen_fd_, wake_fd_}) {
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.fd = fd;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event);
  }
  return absl::OkStatus();
}

void HttpServer::Respond(ExchangeId id, HttpResponse response) {
  Post(Action{Action::kRespond, id, std::move(response), {}});
}
void HttpServer::BeginStream(ExchangeId id, HttpResponse head) {
  Post(Action{Action::kBeginStream, id, std::move(head), {}});
}
void HttpServer::StreamWrite(ExchangeId id, std::string data) {
  Post(Action{Action::kWrite, id, {}, std::move(data)});
}
void HttpServer::EndStream(ExchangeId id) { Post(Action{Action::kEnd, id, {}, {}}); }

HttpServerCounters HttpServer::counters() const {
  MutexLock lock(&mu_);
  return counters_;
}

void HttpServer::Post(Action action) {
  {
    MutexLock lock(&mu_);
    outbox_.push_back(std::move(action));
  }
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
}

void HttpServer::Loop() {
  std::vector<epoll_event> events(64);
  while (!stop_.load()) {
    const int n = epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), 250);
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == listen_fd_) {
        Accept();
      } else if (fd == wake_fd_) {
        uint64_t count;
        (void)!read(wake_fd_, &count, sizeof(count));
      } else if (fd < static_cast<int>(slots_.size()) && slots_[fd]) {
        Connection& connection = *slots_[fd];
        if (events[i].events & (EPOLLHUP | EPOLLERR)) {
          Close(connection);
          continue;
        }
        if (events[i].events & EPOLLIN) OnReadable(connection);
        if (slots_[fd] && (events[i].events & EPOLLOUT)) Flush(connection);
      }
    }
    std::vector<Action> actions;
    {
      MutexLock lock(&mu_);
      actions.swap(outbox_);
    }
    for (Action& action : actions) Apply(action);
    if (absl::Now() - last_sweep_ > absl::Seconds(1)) Sweep();
  }
}

void HttpServer::Accept() {
  while (true) {
    sockaddr_in peer{};
    socklen_t peer_len = sizeof(peer);
    const int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &peer_len,
                           SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN, or a connection that died in the backlog
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (fd >= static_cast<int>(slots_.size())) slots_.resize(fd + 1);
    slots_[fd] = std::make_unique<Connection>(options_.limits);
    Connection& connection = *slots_[fd];
    connection.fd = fd;
    connection.client = peer.sin_addr.s_addr;
    char text[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &peer.sin_addr, text, sizeof(text));
    connection.client_text = text;
    ++open_connections_;
    const int from_client = ++client_connections_[connection.client];
    UpdateInterest(connection);
    if (open_connections_ > options_.max_connections) {
      RefuseConnection(connection,
                       absl::StrCat("server is at its limit of ", options_.max_connections,
                                    " connections; retry later"));
      continue;
    }
    if (from_client > options_.max_connections_per_client) {
      RefuseConnection(
          connection,
          absl::StrCat("client ", connection.client_text, " is at its limit of ",
                       options_.max_connections_per_client, " connections; retry later"));
      continue;
    }
    MutexLock lock(&mu_);
    ++counters_.connections_accepted;
  }
}

void HttpServer::RefuseConnection(Connection& connection, const std::string& reason) {
  {
    MutexLock lock(&mu_);
    ++counters_.connections_refused;
  }
  HttpResponse busy = handler_->ProtocolError(503, reason);
  busy.headers.push_back({"Retry-After", absl::StrCat(options_.retry_after_seconds)});
  connection.out = SerializeResponseHead(busy, false) + busy.body;
  connection.close_after_write = true;
  LogAccess(connection, 0, "503");
  Flush(connection);
}

void HttpServer::LogAccess(const Connection& connection, ExchangeId id,
                           const std::string& status) const {
  const double ms = absl::ToDoubleMilliseconds(absl::Now() - connection.exchange_started);
  SPLITSPEC_LOG(INFO) << "http: " << connection.method << " " << connection.path << " " << status
                      << " " << absl::StrFormat("%.1fms", ms)
                      << " id=" << (id == 0 ? "-" : handler_->RequestId(id))
                      << " client=" << connection.client_text;
}

void HttpServer::OnReadable(Connection& connection) {
  const size_t cap = options_.limits.max_header_bytes + options_.limits.max_body_bytes;
  char buffer[16384];
  while (connection.unparsed() < cap) {
    const ssize_t got = recv(connection.fd, buffer, sizeof(buffer), 0);
    if (got > 0) {
      if (!connection.mid_request() && connection.exchange == 0)
        connection.request_started = absl::Now();
      connection.in.append(buffer, static_cast<size_t>(got));
      connection.last_activity = absl::Now();
      continue;
    }
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (got < 0 && errno == EINTR) continue;
    Close(connection);  // orderly shutdown (0) or a reset: the peer is gone
    return;
  }
  Dispatch(connection);
}

void HttpServer::Dispatch(Connection& connection) {
  if (connection.exchange != 0 || connection.close_after_write || connection.unparsed() == 0) {
    UpdateInterest(connection);
    return;
  }
  HttpRequestParser& parser = connection.parser;
  connection.in_parsed +=
      parser.Feed(absl::string_view(connection.in).substr(connection.in_parsed));
  // Drop what was parsed; keep a pipelined rest (moved at most once per
  // parsed byte of the same size: linear).
  if (connection.in_parsed == connection.in.size()) {
    connection.in.clear();
    connection.in_parsed = 0;
  } else if (connection.in_parsed >= connection.unparsed()) {
    connection.in.erase(0, connection.in_parsed);
    connection.in_parsed = 0;
  }
  {
    MutexLock lock(&mu_);
    counters_.parser_bytes_examined += parser.bytes_examined() - connection.parser_examined;
  }
  connection.parser_examined = parser.bytes_examined();
  if (parser.status() == HttpRequestParser::kIncomplete) {
    if (connection.request_started == absl::InfiniteFuture())
      connection.request_started = absl::Now();
    UpdateInterest(connection);
    return;
  }
  if (parser.status() == HttpRequestParser::kError) {
    RefuseWith(connection, parser.error_status(), parser.error_reason());
    return;
  }
  HttpRequest request = parser.TakeRequest();
  connection.request_started = connection.unparsed() == 0 ? absl::InfiniteFuture() : absl::Now();
  connection.exchange = next_exchange_++;
  connection.method = request.method;
  connection.path = request.path;
  connection.status = "-";
  connection.exchange_started = absl::Now();
  connection.keep_alive = request.KeepAlive();
  connection.chunked = request.version_minor >= 1;
  exchange_fds_[connection.exchange] = connection.fd;
  UpdateInterest(connection);
  {
    MutexLock lock(&mu_);
    ++counters_.requests;
  }
  handler_->OnRequest(*this, connection.exchange, std::move(request));
}

void HttpServer::RefuseWith(Connection& connection, int status, const std::string& reason) {
  {
    MutexLock lock(&mu_);
    ++counters_.protocol_errors;
  }
  const HttpResponse response = handler_->ProtocolError(status, reason);
  connection.method = connection.path = "-";  // what did not parse is not echoed to the log
  if (connection.request_started != absl::InfiniteFuture())
    connection.exchange_started = connection.request_started;
  LogAccess(connection, 0, absl::StrCat(status));
  connection.out += SerializeResponseHead(response, false) + response.body;
  connection.in.clear();
  connection.in_parsed = 0;
  connection.close_after_write = true;
  Flush(connection);
}

void HttpServer::Apply(Action& action) {
  auto it = exchange_fds_.find(action.id);
  if (it == exchange_fds_.end()) return;
  Connection& connection = *slots_[it->second];
  bool finished = false;
  switch (action.kind) {
    case Action::kRespond:
      connection.status = absl::StrCat(action.response.status);
      connection.out +=
          SerializeResponseHead(action.response, connection.keep_alive) + action.response.body;
      connection.close_after_write = !connection.keep_alive;
      finished = true;
      break;
    case Action::kBeginStream:
      connection.status = absl::StrCat(action.response.status);
      connection.out +=
          SerializeStreamHead(action.response, connection.chunked, connection.keep_alive);
      break;
    case Action::kWrite:
      connection.out += connection.chunked ? EncodeChunk(action.data) : action.data;
      break;
    case Action::kEnd:
      if (connection.chunked) connection.out += LastChunk();
      connection.close_after_write = !connection.keep_alive || !connection.chunked;
      finished = true;
      break;
  }
  if (finished) {
    LogAccess(connection, action.id, connection.status);
    exchange_fds_.erase(it);
    connection.exchange = 0;
    connection.last_activity = absl::Now();
  }
  const int fd = connection.fd;
  Flush(connection);
  if (!slots_[fd]) return;  // closed while flushing: the peer is gone
  // What the socket did not take is what the client left unread.
  if (connection.out.size() > options_.max_output_bytes) {
    SPLITSPEC_LOG(WARNING) << "http: dropping a client that left " << connection.out.size()
                           << " bytes unread";
    Close(connection);
    return;
  }
  // A pipelined request may be waiting; none is taken on while stopping.
  if (finished && !stop_.load()) Dispatch(connection);
}

void HttpServer::Flush(Connection& connection) {
  while (!connection.out.empty()) {
    const ssize_t sent =
        send(connection.fd, connection.out.data(), connection.out.size(), MSG_NOSIGNAL);
    if (sent > 0) {
      connection.out.erase(0, static_cast<size_t>(sent));
      continue;
    }
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    Close(connection);  // EPIPE, ECONNRESET: the peer is gone
    return;
  }
  if (connection.out.empty() && connection.close_after_write) {
    Close(connection);
    return;
  }
  UpdateInterest(connection);
}

void HttpServer::UpdateInterest(Connection& connection) {
  const size_t cap = options_.limits.max_header_bytes + options_.limits.max_body_bytes;
  uint32_t interest = 0;
  if (connection.unparsed() < cap && !connection.close_after_write) interest |= EPOLLIN;
  if (!connection.out.empty()) interest |= EPOLLOUT;
  if (connection.registered && interest == connection.interest) return;
  epoll_event event{};
  event.events = interest;  // EPOLLHUP and EPOLLERR are always reported
  event.data.fd = connection.fd;
  epoll_ctl(epoll_fd_, connection.registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, connection.fd,
            &event);
  connection.registered = true;
  connection.interest = interest;
}

void HttpServer::Close(Connection& connection) {
  const int fd = connection.fd;
  if (connection.exchange != 0) {
    LogAccess(connection, connection.exchange, absl::StrCat(connection.status, "-aborted"));
    exchange_fds_.erase(connection.exchange);
    {
      MutexLock lock(&mu_);
      ++counters_.aborted_exchanges;
    }
    handler_->OnExchangeAborted(connection.exchange);
  }
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  close(fd);
  --open_connections_;
  if (auto it = client_connections_.find(connection.client);
      it != client_connections_.end() && --it->second <= 0) {
    client_connections_.erase(it);
  }
  slots_[fd].reset();
}

void HttpServer::Sweep() {
  const absl::Time now = absl::Now();
  last_sweep_ = now;
  for (auto& slot : slots_) {
    if (!slot) continue;
    Connection& connection = *slot;
    if (connection.exchange != 0 || connection.close_after_write) continue;
    if (now - connection.request_started > options_.request_timeout) {
      RefuseWith(connection, 408,
                 absl::StrCat("request not received completely within ",
                              absl::FormatDuration(options_.request_timeout)));
    } else if (!connection.mid_request() &&
               now - connection.last_activity > options_.idle_timeout) {
      Close(connection);
    }
  }
}

}  // namespace splitspec::coordinator::http
