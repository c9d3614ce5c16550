// A minimal blocking HTTP/1.1 client over a loopback socket, for the front
// door's tests: send raw bytes, read responses (Content-Length, chunked, or
// until close), step through a chunked stream chunk by chunk.
//
//   ASSIGN_OR_RETURN(auto connection, TestHttpConnection::Connect(port));
//   RETURN_IF_ERROR(connection->Send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
//   ASSIGN_OR_RETURN(TestHttpResponse response, connection->ReadResponse());
//
// Reads give up after 60 s (a safety net against a hung server, not a timing check).
// Thread safety: one thread per connection.
#ifndef SPLITSPEC_TESTS_TESTING_HTTP_TEST_CLIENT_H_
#define SPLITSPEC_TESTS_TESTING_HTTP_TEST_CLIENT_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace splitspec::coordinator::http {

struct TestHttpResponse {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;                                          // de-chunked

  // The first header named `name` (lower case), or "".
  std::string Header(const std::string& name) const;
};

class TestHttpConnection {
 public:
  static absl::StatusOr<std::unique_ptr<TestHttpConnection>> Connect(int port);
  ~TestHttpConnection();

  absl::Status Send(const std::string& bytes);
  // Status line and headers of the next response.
  absl::StatusOr<TestHttpResponse> ReadHead();
  // The next chunk of a chunked body; "" for the last chunk.
  absl::StatusOr<std::string> ReadChunk();
  // ReadHead, then the whole body.
  absl::StatusOr<TestHttpResponse> ReadResponse();
  // True if the server closed the connection (after what was already read).
  bool PeerClosed();
  // True if a byte of a response (or the close) arrives within `wait_ms`.
  bool WaitReadable(int wait_ms);

 private:
  explicit TestHttpConnection(int fd) : fd_(fd) {}
  absl::Status Fill();  // reads more bytes into buffer_
  absl::StatusOr<std::string> ReadLine();
  absl::StatusOr<std::string> ReadExactly(size_t n);

  int fd_;
  std::string buffer_;
};

// One request on a fresh connection ("Host" and "Content-Length" added).
absl::StatusOr<TestHttpResponse> HttpRequestOnce(int port, const std::string& method,
                                                 const std::string& path,
                                                 const std::string& body = "",
                                                 const std::string& extra_headers = "");

// The data of each "data: ..." event of an SSE body, in order.
std::vector<std::string> SseData(const std::string& body);

}  // namespace splitspec::coordinator::http

#endif  // SPLITSPEC_TESTS_TESTING_HTTP_TEST_CLIENT_H_
