// HttpServer: an HTTP/1.1 server on plain POSIX sockets (one epoll I/O thread)
// that hands complete requests to an HttpHandler and writes the responses the
// handler posts back, whole or streamed, from any thread.
//
//   class Hello : public HttpHandler {
//     void OnRequest(HttpServer& server, ExchangeId id, HttpRequest request) override {
//       server.Respond(id, HttpResponse::Text(200, "hello\n"));
//     }
//     ...
//   };
//   ASSIGN_OR_RETURN(auto server, HttpServer::Start(options, &hello));
//   // ... server->port() ...; the destructor stops the I/O thread.
//
// Thread model: Start() spawns one I/O thread that owns the listening socket
// and every connection: it accepts, reads, parses (http_parser.h: one
// incremental parser per connection, fed each byte once as it arrives), calls
// the handler, and writes. Respond / BeginStream / StreamWrite / EndStream may be
// called from any thread: they queue the action under a mutex and wake the I/O
// thread through an eventfd; nothing else is shared.
//
// Per connection, requests are answered one at a time in order (pipelined
// requests wait in the input buffer). Keep-alive follows HttpRequest::KeepAlive.
// Streams use chunked transfer coding for HTTP/1.1 clients and
// close-delimited bodies for HTTP/1.0 ones.
//
// Limits and overload: a connection beyond max_connections, or beyond
// max_connections_per_client from one client address, is answered 503
// (Retry-After) and closed (so ~512 slow connections from one address cannot
// lock everyone else out); malformed or oversized requests get the parser's
// status and reason (formatted by the handler's ProtocolError) and the
// connection is closed; a request that does not arrive completely within
// request_timeout gets 408; idle keep-alive connections close after
// idle_timeout; a client that lets more than max_output_bytes pile up unread
// is dropped. When a connection closes (peer gone, write error, too slow)
// while its exchange's response is unfinished, the handler's
// OnExchangeAborted(id) is called once and later posts for `id` are ignored.
//
// Access log: one INFO line per request when its response is complete, and
// one per refusal (over a limit, malformed, timed out) or abort:
//   http: POST /v1/completions 200 12.3ms id=<handler's RequestId> client=127.0.0.1
#ifndef SPLITSPEC_COORDINATOR_HTTP_HTTP_SERVER_H_
#define SPLITSPEC_COORDINATOR_HTTP_HTTP_SERVER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/http/http_message.h"
#include "coordinator/http/http_parser.h"
#include "runtime/base/mutex.h"

namespace splitspec::coordinator::http {

// Names one request/response exchange; never reused by a server.
using ExchangeId = uint64_t;

class HttpServer;

class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  // A complete request. Runs on the I/O thread: must not block. The handler
  // answers exactly once, now or later, from any thread: Respond(id, ...), or
  // BeginStream(id, ...), StreamWrite(id, ...)*, EndStream(id).
  virtual void OnRequest(HttpServer& server, ExchangeId id, HttpRequest request) = 0;
  // The connection of `id` closed before its response was complete. Runs on
  // the I/O thread; must not block.
  virtual void OnExchangeAborted(ExchangeId id) = 0;
  // The response for a request the server refuses itself (malformed: 400,
  // 413, 431, 501, 505; timeout: 408; overload: 503). Runs on the I/O thread.
  virtual HttpResponse ProtocolError(int status, const std::string& reason) = 0;
  // The id the access log names exchange `id` by (the handler's request id).
  // Runs on the I/O thread.
  virtual std::string RequestId(ExchangeId id) const { return std::to_string(id); }
};

struct HttpServerOptions {
  std::string host = "127.0.0.1";  // loopback only by default; "0.0.0.0" for all interfaces
  int port = 8000;                 // 0 picks a free port (see HttpServer::port())
  HttpLimits limits;
  int max_connections = 512;            // open connections; more are answered 503
  int max_connections_per_client = 64;  // from one IPv4 address; more are answered 503
  absl::Duration request_timeout = absl::Seconds(30);  // first byte of a request to its last
  absl::Duration idle_timeout = absl::Seconds(60);     // keep-alive connection with nothing to do
  size_t max_output_bytes = 16 << 20;                  // unread response bytes per connection
  int retry_after_seconds = 1;                         // Retry-After of the 503 for overload

  // InvalidArgument naming the field out of range.
  absl::Status Validate() const;
};

struct HttpServerCounters {
  uint64_t connections_accepted = 0;
  uint64_t connections_refused = 0;  // over max_connections or max_connections_per_client
  uint64_t requests = 0;             // complete requests handed to the handler
  uint64_t protocol_errors = 0;      // answered by ProtocolError (malformed, oversized, timeout)
  uint64_t aborted_exchanges = 0;    // OnExchangeAborted calls
  // Bytes the request parsers looked at (HttpRequestParser::bytes_examined):
  // linear in the bytes received, however they were split into reads.
  uint64_t parser_bytes_examined = 0;
};

class HttpServer {
 public:
  // Binds host:port, listens and starts the I/O thread. Errors: the options'
  // (InvalidArgument), or Unavailable naming the address for a socket, bind
  // or listen failure. REQUIRES: handler outlives the server.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                           HttpHandler* handler);
  // Stops the I/O thread, sends what was posted before (as far as each socket
  // takes it without blocking; no new request is dispatched), and closes every
  // connection.
  ~HttpServer();

  int port() const { return port_; }

  // Thread-safe. Posts for an unknown, finished or aborted exchange are ignored.
  void Respond(ExchangeId id, HttpResponse response);
  // Starts a streamed response with `head`'s status and headers (its body is ignored).
  void BeginStream(ExchangeId id, HttpResponse head);
  void StreamWrite(ExchangeId id, std::string data);
  void EndStream(ExchangeId id);

  HttpServerCounters counters() const;

 private:
  struct Connection;
  struct Action {
    enum Kind { kRespond, kBeginStream, kWrite, kEnd };
    Kind kind;
    ExchangeId id;
    HttpResponse response;  // kRespond, kBeginStream
    std::string data;       // kWrite
  };

  HttpServer(const HttpServerOptions& options, HttpHandler* handler);
  absl::Status Listen();
  void Post(Action action);
  void Loop();
  void Accept();
  void OnReadable(Connection& connection);
  void Dispatch(Connection& connection);
  void Apply(Action& action);
  void Flush(Connection& connection);
  void UpdateInterest(Connection& connection);
  void Close(Connection& connection);
  void Sweep();
  void RefuseWith(Connection& connection, int status, const std::string& reason);
  // Answers a connection over a limit with 503 + Retry-After and closes it.
  void RefuseConnection(Connection& connection, const std::string& reason);
  void LogAccess(const Connection& connection, ExchangeId id, const std::string& status) const;

  const HttpServerOptions options_;
  HttpHandler* const handler_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;

  // I/O thread only.
  std::vector<std::unique_ptr<Connection>> slots_;  // indexed by fd
  int open_connections_ = 0;
  ExchangeId next_exchange_ = 1;
  absl::flat_hash_map<ExchangeId, int> exchange_fds_;      // unfinished exchanges -> connection fd
  absl::flat_hash_map<uint32_t, int> client_connections_;  // open connections per client address
  absl::Time last_sweep_ = absl::Now();

  mutable Mutex mu_;
  // State below is protected by mu_.
  std::vector<Action> outbox_ ABSL_GUARDED_BY(mu_);
  HttpServerCounters counters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace splitspec::coordinator::http

#endif  // SPLITSPEC_COORDINATOR_HTTP_HTTP_SERVER_H_
