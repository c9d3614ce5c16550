#include "tests/testing/http_test_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/base/status_macros.h"

namespace splitspec::coordinator::http {

std::string TestHttpResponse::Header(const std::string& name) const {
  for (const auto& [key, value] : headers) {
    if (key == name) return value;
  }
  return "";
}

absl::StatusOr<std::unique_ptr<TestHttpConnection>> TestHttpConnection::Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError("socket() failed");
  timeval timeout{60, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("connect to port ", port, ": ", strerror(errno)));
  }
  return std::unique_ptr<TestHttpConnection>(new TestHttpConnection(fd));
}

TestHttpConnection::~TestHttpConnection() { close(fd_); }

absl::Status TestHttpConnection::Send(const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return absl::UnavailableError(absl::StrCat("send: ", strerror(errno)));
    sent += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status TestHttpConnection::Fill() {
  char chunk[8192];
  const ssize_t n = recv(fd_, chunk, sizeof(chunk), 0);
  if (n == 0) return absl::OutOfRangeError("connection closed by the server");
  if (n < 0) return absl::UnavailableError(absl::StrCat("recv: ", strerror(errno)));
  buffer_.append(chunk, static_cast<size_t>(n));
  return absl::OkStatus();
}

absl::StatusOr<std::string> TestHttpConnection::ReadLine() {
  size_t end;
  while ((end = buffer_.find("\r\n")) == std::string::npos) RETURN_IF_ERROR(Fill());
  std::string line = buffer_.substr(0, end);
  buffer_.erase(0, end + 2);
  return line;
}

absl::StatusOr<std::string> TestHttpConnection::ReadExactly(size_t n) {
  while (buffer_.size() < n) RETURN_IF_ERROR(Fill());
  std::string out = buffer_.substr(0, n);
  buffer_.erase(0, n);
  return out;
}

absl::StatusOr<TestHttpResponse> TestHttpConnection::ReadHead() {
  TestHttpResponse response;
  ASSIGN_OR_RETURN(std::string status_line, ReadLine());
  const std::vector<std::string> parts = absl::StrSplit(status_line, absl::MaxSplits(' ', 2));
  if (parts.size() < 2 || !absl::SimpleAtoi(parts[1], &response.status)) {
    return absl::DataLossError(absl::StrCat("bad status line '", status_line, "'"));
  }
  while (true) {
    ASSIGN_OR_RETURN(std::string line, ReadLine());
    if (line.empty()) break;
    const size_t colon = line.find(':');
    if (colon == std::string::npos)
      return absl::DataLossError(absl::StrCat("bad header '", line, "'"));
    response.headers.emplace_back(absl::AsciiStrToLower(line.substr(0, colon)),
                                  std::string(absl::StripAsciiWhitespace(line.substr(colon + 1))));
  }
  return response;
}

absl::StatusOr<std::string> TestHttpConnection::ReadChunk() {
  ASSIGN_OR_RETURN(std::string size_line, ReadLine());
  size_t size = 0;
  if (!absl::SimpleHexAtoi(size_line, &size))
    return absl::DataLossError(absl::StrCat("bad chunk size '", size_line, "'"));
  ASSIGN_OR_RETURN(std::string data, ReadExactly(size));
  ASSIGN_OR_RETURN(std::string crlf, ReadLine());
  if (!crlf.empty()) return absl::DataLossError("chunk not followed by CRLF");
  return data;
}

absl::StatusOr<TestHttpResponse> TestHttpConnection::ReadResponse() {
  ASSIGN_OR_RETURN(TestHttpResponse response, ReadHead());
  if (response.Header("transfer-encoding") == "chunked") {
    while (true) {
      ASSIGN_OR_RETURN(std::string chunk, ReadChunk());
      if (chunk.empty()) break;
      response.body += chunk;
    }
  } else if (const std::string length = response.Header("content-length"); !length.empty()) {
    size_t n = 0;
    if (!absl::SimpleAtoi(length, &n)) return absl::DataLossError("bad Content-Length");
    ASSIGN_OR_RETURN(response.body, ReadExactly(n));
  } else {
    while (Fill().ok()) {
    }
    response.body = std::move(buffer_);
    buffer_.clear();
  }
  return response;
}

bool TestHttpConnection::WaitReadable(int wait_ms) {
  if (!buffer_.empty()) return true;
  pollfd readable{fd_, POLLIN, 0};
  return poll(&readable, 1, wait_ms) > 0;
}

bool TestHttpConnection::PeerClosed() {
  if (!buffer_.empty()) return false;
  char byte;
  return recv(fd_, &byte, 1, MSG_PEEK) == 0;
}

absl::StatusOr<TestHttpResponse> HttpRequestOnce(int port, const std::string& method,
                                                 const std::string& path, const std::string& body,
                                                 const std::string& extra_headers) {
  ASSIGN_OR_RETURN(std::unique_ptr<TestHttpConnection> connection,
                   TestHttpConnection::Connect(port));
  RETURN_IF_ERROR(connection->Send(
      absl::StrCat(method, " ", path, " HTTP/1.1\r\nHost: 127.0.0.1\r\n", extra_headers,
                   "Content-Length: ", body.size(), "\r\n\r\n", body)));
  return connection->ReadResponse();
}

std::vector<std::string> SseData(const std::string& body) {
  std::vector<std::string> out;
  for (absl::string_view event : absl::StrSplit(body, "\n\n", absl::SkipEmpty())) {
    if (absl::StartsWith(event, "data: ")) out.emplace_back(event.substr(6));
  }
  return out;
}

}  // namespace splitspec::coordinator::http
