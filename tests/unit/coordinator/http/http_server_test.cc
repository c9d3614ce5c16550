// HttpServer over real loopback sockets: keep-alive and pipelining, chunked
// streams posted from another thread, malformed requests, the connection
// limit, exchanges aborted by a disconnecting client, the whole-request
// deadline (408), the idle close, the cap on unread output, and the parser's
// linear work for a body that arrives in small pieces.
#include "coordinator/http/http_server.h"

#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/base/mutex.h"
#include "tests/testing/http_test_client.h"

namespace splitspec::coordinator::http {
namespace {

class TestHandler : public HttpHandler {
 public:
  ~TestHandler() override { JoinFlood(); }

  void OnRequest(HttpServer& server, ExchangeId id, HttpRequest request) override {
    if (request.path == "/echo") {
      server.Respond(id, HttpResponse::Text(200, absl::StrCat(request.method, " ", request.target,
                                                              " ", request.body)));
    } else if (request.path == "/stream") {
      // Posted from another thread, as the coordinator bridge does.
      std::thread([&server, id] {
        server.BeginStream(id, HttpResponse::Text(200, ""));
        server.StreamWrite(id, "first");
        server.StreamWrite(id, "second");
        server.EndStream(id);
      }).join();
    } else if (request.path == "/flood") {
      // Streams until the server drops the exchange (the client reads nothing).
      flood_ = std::thread([this, &server, id] {
        server.BeginStream(id, HttpResponse::Text(200, ""));
        const std::string piece(64 << 10, 'x');
        for (int i = 0; i < 4096 && !Aborted(id); ++i) server.StreamWrite(id, piece);
      });
      MutexLock lock(&mu_);
      held_.insert(id);
      cv_.NotifyAll();
    } else {
      MutexLock lock(&mu_);
      held_.insert(id);
      cv_.NotifyAll();
    }
  }
  void OnExchangeAborted(ExchangeId id) override {
    MutexLock lock(&mu_);
    aborted_.insert(id);
    cv_.NotifyAll();
  }
  HttpResponse ProtocolError(int status, const std::string& reason) override {
    return HttpResponse::Text(status, "refused: " + reason);
  }

  ExchangeId WaitForHeld() {
    MutexLock lock(&mu_);
    while (held_.empty()) cv_.Wait(&mu_);
    return *held_.begin();
  }
  void WaitForAborted(ExchangeId id) {
    MutexLock lock(&mu_);
    while (!aborted_.contains(id)) cv_.Wait(&mu_);
  }
  bool Aborted(ExchangeId id) {
    MutexLock lock(&mu_);
    return aborted_.contains(id);
  }
  // Ends the /flood writer; call before the server goes away.
  void JoinFlood() {
    if (flood_.joinable()) flood_.join();
  }

 private:
  std::thread flood_;
  Mutex mu_;
  CondVar cv_;
  std::set<ExchangeId> held_ ABSL_GUARDED_BY(mu_);
  std::set<ExchangeId> aborted_ ABSL_GUARDED_BY(mu_);
};

std::unique_ptr<HttpServer> StartServerWith(TestHandler* handler, HttpServerOptions options) {
  options.port = 0;
  auto server = HttpServer::Start(options, handler);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

std::unique_ptr<HttpServer> StartServer(TestHandler* handler, int max_connections = 16,
                                        int per_client = 16) {
  HttpServerOptions options;
  options.max_connections = max_connections;
  options.max_connections_per_client = per_client;
  return StartServerWith(handler, options);
}

TEST(HttpServerTest, KeepAliveAnswersPipelinedRequestsInOrder) {
  TestHandler handler;
  auto server = StartServer(&handler);
  auto connection = TestHttpConnection::Connect(server->port());
  ASSERT_TRUE(connection.ok()) << connection.status();
  ASSERT_TRUE((*connection)
                  ->Send("POST /echo?a=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\none"
                         "GET /echo HTTP/1.1\r\nHost: h\r\n\r\n")
                  .ok());
  auto first = (*connection)->ReadResponse();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->status, 200);
  EXPECT_EQ(first->body, "POST /echo?a=1 one");
  EXPECT_EQ(first->Header("connection"), "keep-alive");
  auto second = (*connection)->ReadResponse();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->body, "GET /echo ");
  // The same connection serves a third request later.
  ASSERT_TRUE(
      (*connection)->Send("GET /echo HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n").ok());
  auto third = (*connection)->ReadResponse();
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ(third->Header("connection"), "close");
  EXPECT_TRUE((*connection)->PeerClosed());
  EXPECT_EQ(server->counters().requests, 3u);
}

TEST(HttpServerTest, StreamsUseChunkedTransferCoding) {
  TestHandler handler;
  auto server = StartServer(&handler);
  auto connection = TestHttpConnection::Connect(server->port());
  ASSERT_TRUE(connection.ok());
  ASSERT_TRUE((*connection)->Send("GET /stream HTTP/1.1\r\nHost: h\r\n\r\n").ok());
  auto head = (*connection)->ReadHead();
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(head->status, 200);
  EXPECT_EQ(head->Header("transfer-encoding"), "chunked");
  EXPECT_EQ(*(*connection)->ReadChunk(), "first");
  EXPECT_EQ(*(*connection)->ReadChunk(), "second");
  EXPECT_EQ(*(*connection)->ReadChunk(), "");
}

TEST(HttpServerTest, MalformedRequestGetsTheReasonAndTheConnectionCloses) {
  TestHandler handler;
  auto server = StartServer(&handler);
  auto connection = TestHttpConnection::Connect(server->port());
  ASSERT_TRUE(connection.ok());
  ASSERT_TRUE((*connection)->Send("GET /echo HTTP/1.1\r\nHost h\r\n\r\n").ok());
  auto response = (*connection)->ReadResponse();
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 400);
  EXPECT_EQ(response->body, "refused: header line without ':' ('Host h')");
  EXPECT_TRUE((*connection)->PeerClosed());
  EXPECT_EQ(server->counters().protocol_errors, 1u);
}

TEST(HttpServerTest, ConnectionsOverTheLimitGet503WithRetryAfter) {
  TestHandler handler;
  auto server = StartServer(&handler, /*max_connections=*/1);
  auto first = TestHttpConnection::Connect(server->port());
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE((*first)->Send("GET /echo HTTP/1.1\r\nHost: h\r\n\r\n").ok());
  ASSERT_TRUE((*first)->ReadResponse().ok());  // the first connection is accepted and open
  auto second = TestHttpConnection::Connect(server->port());
  ASSERT_TRUE(second.ok());
  auto refused = (*second)->ReadResponse();
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->status, 503);
  EXPECT_EQ(refused->Header("retry-after"), "1");
  EXPECT_EQ(refused->body, "refused: server is at its limit of 1 connections; retry later");
  EXPECT_EQ(server->counters().connections_refused, 1u);
}

// Slowloris: connections that trickle a request and never finish it. Past the
// per-client limit, one address gets 503 while the server has room for others.
TEST(HttpServerTest, SlowClientPastThePerClientLimitIsRefused) {
  TestHandler handler;
  auto server = StartServer(&handler, /*max_connections=*/100, /*per_client=*/3);
  std::vector<std::unique_ptr<TestHttpConnection>> slow;
  for (int i = 0; i < 3; ++i) {
    auto connection = TestHttpConnection::Connect(server->port());
    ASSERT_TRUE(connection.ok()) << connection.status();
    ASSERT_TRUE((*connection)->Send("GET /echo HTTP/1.1\r\nHost: h\r\nX-Slow: ").ok());
    slow.push_back(*std::move(connection));
  }
  auto extra = TestHttpConnection::Connect(server->port());
  ASSERT_TRUE(extra.ok());
  ASSERT_TRUE((*extra)->Send("GET /echo HTTP/1.1\r\nHost: h\r\n\r\n").ok());
  auto refused = (*extra)->ReadResponse();
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->status, 503) << refused->body;
  EXPECT_EQ(refused->Header("retry-after"), "1");
  EXPECT_EQ(refused->body,
            "refused: client 127.0.0.1 is at its limit of 3 connections; retry later");
  EXPECT_EQ(server->counters().connections_refused, 1u);
  // The slow ones are still served once they finish their request.
  ASSERT_TRUE(slow[0]->Send("1\r\n\r\n").ok());
  auto served = slow[0]->ReadResponse();
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ(served->status, 200);
}

TEST(HttpServerTest, ChunkedRequestBodyIsDecoded) {
  TestHandler handler;
  auto server = StartServer(&handler);
  auto connection = TestHttpConnection::Connect(server->port());
  ASSERT_TRUE(connection.ok());
  ASSERT_TRUE(
      (*connection)
          ->Send("POST /echo HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n")
          .ok());
  ASSERT_TRUE((*connection)->Send("2\r\nde\r\n0\r\n\r\n").ok());
  auto response = (*connection)->ReadResponse();
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "POST /echo abcde");
}

TEST(HttpServerTest, ClientDisconnectAbortsItsUnfinishedExchange) {
  TestHandler handler;
  auto server = StartServer(&handler);
  auto connection = TestHttpConnection::Connect(server->port());
  ASSERT_TRUE(connection.ok());
  ASSERT_TRUE((*connection)->Send("GET /hold HTTP/1.1\r\nHost: h\r\n\r\n").ok());
  const ExchangeId id = handler.WaitForHeld();
  connection->reset();  // the client goes away before any answer
  handler.WaitForAborted(id);
  server->Respond(id, HttpResponse::Text(200, "too late"));  // ignored
  EXPECT_EQ(server->counters().aborted_exchanges, 1u);
}

TEST(HttpServerTest, BindFailureNamesTheAddress) {
  TestHandler handler;
  auto first = StartServer(&handler);
  HttpServerOptions options;
  options.port = first->port();
  auto second = HttpServer::Start(options, &handler);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find(absl::StrCat("cannot bind 127.0.0.1:", first->port())),
            absl::string_view::npos)
      << second.status();
}

// request_timeout runs from a request's first byte to its last: a client that
// keeps trickling bytes does not extend it.
TEST(HttpServerTest, RequestNotCompleteWithinTheDeadlineGets408) {
  TestHandler handler;
  HttpServerOptions options;
  options.request_timeout = absl::Seconds(1);
  auto server = StartServerWith(&handler, options);
  auto connection = TestHttpConnection::Connect(server->port());
  ASSERT_TRUE(connection.ok());
  ASSERT_TRUE((*connection)->Send("GET /echo HTTP/1.1\r\nHost: h\r\nX-Slow: ").ok());
  // One byte every 250 ms until the server answers (a deadline that restarted
  // with each byte would never answer: 40 bytes take 10 s, then the read fails).
  int trickled = 0;
  while (trickled < 40 && !(*connection)->WaitReadable(250)) {
    ASSERT_TRUE((*connection)->Send("a").ok());
    ++trickled;
  }
  auto response = (*connection)->ReadResponse();
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 408);
  EXPECT_EQ(response->body, "refused: request not received completely within 1s");
  EXPECT_EQ(server->counters().protocol_errors, 1u);
  EXPECT_EQ(server->counters().requests, 0u);
}

TEST(HttpServerTest, IdleKeepAliveConnectionIsClosed) {
  TestHandler handler;
  HttpServerOptions options;
  options.idle_timeout = absl::Seconds(1);
  auto server = StartServerWith(&handler, options);
  auto connection = TestHttpConnection::Connect(server->port());
  ASSERT_TRUE(connection.ok());
  ASSERT_TRUE((*connection)->Send("GET /echo HTTP/1.1\r\nHost: h\r\n\r\n").ok());
  auto response = (*connection)->ReadResponse();
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->Header("connection"), "keep-alive");
  EXPECT_TRUE((*connection)->PeerClosed());           // blocks until the server closes it
  EXPECT_EQ(server->counters().protocol_errors, 0u);  // a plain close, no 408
}

// A request in progress is not idle: with idle_timeout shorter than
// request_timeout, a slow request still gets its 408, not a silent close.
TEST(HttpServerTest, IdleTimeoutDoesNotCutARequestInProgress) {
  TestHandler handler;
  HttpServerOptions options;
  options.idle_timeout = absl::Seconds(1);
  options.request_timeout = absl::Seconds(3);
  auto server = StartServerWith(&handler, options);
  auto connection = TestHttpConnection::Connect(server->port());
  ASSERT_TRUE(connection.ok());
  ASSERT_TRUE(
      (*connection)
          ->Send("POST /echo HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nab")
          .ok());
  auto response = (*connection)->ReadResponse();
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 408);
}

TEST(HttpServerTest, ClientThatLeavesOutputUnreadIsDropped) {
  TestHandler handler;
  HttpServerOptions options;
  options.max_output_bytes = 1 << 20;
  auto server = StartServerWith(&handler, options);
  auto connection = TestHttpConnection::Connect(server->port());
  ASSERT_TRUE(connection.ok());
  ASSERT_TRUE((*connection)->Send("GET /flood HTTP/1.1\r\nHost: h\r\n\r\n").ok());
  const ExchangeId id = handler.WaitForHeld();
  // The client reads nothing: once the socket buffers are full, output piles
  // up on the server past max_output_bytes and the exchange is dropped (the
  // writer would otherwise post 256 MiB and the wait below would not end).
  handler.WaitForAborted(id);
  handler.JoinFlood();
  EXPECT_EQ(server->counters().aborted_exchanges, 1u);
}

// A 1 MiB chunked body sent in 512-byte writes: the parser's work (bytes it
// examined, counted by the server) stays linear in the bytes received.
TEST(HttpServerTest, BodyInSmallPiecesIsParsedInLinearWork) {
  TestHandler handler;
  auto server = StartServer(&handler);
  auto connection = TestHttpConnection::Connect(server->port());
  ASSERT_TRUE(connection.ok());
  const std::string body(1 << 20, 'b');
  std::string wire = "POST /echo HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (size_t pos = 0; pos < body.size(); pos += 4000) {
    const std::string chunk = body.substr(pos, 4000);
    absl::StrAppend(&wire, absl::Hex(chunk.size()), "\r\n", chunk, "\r\n");
  }
  wire += "0\r\n\r\n";
  for (size_t pos = 0; pos < wire.size(); pos += 512) {
    ASSERT_TRUE((*connection)->Send(wire.substr(pos, 512)).ok());
  }
  auto response = (*connection)->ReadResponse();
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "POST /echo " + body);
  const uint64_t examined = server->counters().parser_bytes_examined;
  EXPECT_GE(examined, wire.size());
  EXPECT_LE(examined, 2 * wire.size());
}

}  // namespace
}  // namespace splitspec::coordinator::http
