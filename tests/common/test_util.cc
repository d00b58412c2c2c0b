#include "tests/common/test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace tandem::testing {

std::string TestdataDir() {
  // TANDEM_TESTDATA_BUILTIN: the source tree's tests/data, defined for this file only
  // (tests/common/CMakeLists.txt), so no other test object depends on where the checkout lives.
  const char* td = std::getenv("TANDEM_TESTDATA");
  return td != nullptr && *td != '\0' ? td : TANDEM_TESTDATA_BUILTIN;
}

std::string ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string MakeTempDir(const std::string& prefix) {
  std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    std::fprintf(stderr, "cannot make a temporary directory %s: %s\n", tmpl.c_str(), std::strerror(errno));
    std::abort();
  }
  return tmpl;
}

int UnusedLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  int port = ntohs(a.sin_port);
  close(fd);
  return port;
}

}  // namespace tandem::testing
