#include "common/secret_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace tandem {
namespace {

std::string OctalMode(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(m & 07777));
  return buf;
}

}  // namespace

absl::StatusOr<std::string> ReadSecretFile(const std::string& path, const std::string& what,
                                           const SecretFileRules& rules) {
  if (path.empty()) return absl::InvalidArgumentError(what + ": no path given");
  // O_NOFOLLOW is not used: operators link secrets from /run/secrets and the like. The checks
  // below apply to what the link points to (fstat of the opened file).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    return absl::FailedPreconditionError("cannot read " + what + " " + path + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return absl::FailedPreconditionError("cannot stat " + what + " " + path + ": " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::FailedPreconditionError(what + " " + path + " is not a regular file");
  }
  if (rules.owner_only && (st.st_mode & 077) != 0) {
    ::close(fd);
    return absl::FailedPreconditionError(what + " " + path + " has mode " + OctalMode(st.st_mode) +
                                         ": it must be readable by its owner only (chmod 600 " + path + ")");
  }
  constexpr off_t kMaxSecretBytes = 1 << 20;  // a secret file of megabytes is a mistake, not a secret
  if (st.st_size > kMaxSecretBytes) {
    ::close(fd);
    return absl::FailedPreconditionError(what + " " + path + " is " + std::to_string(st.st_size) +
                                         " bytes: too large for a secret");
  }
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      return absl::FailedPreconditionError("cannot read " + what + " " + path + ": " + std::strerror(e));
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > static_cast<size_t>(kMaxSecretBytes)) break;
  }
  ::close(fd);
  if (rules.strip_trailing_whitespace) {
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ' || text.back() == '\t')) {
      text.pop_back();
    }
  }
  if (text.empty()) return absl::FailedPreconditionError(what + " " + path + " is empty");
  if (text.size() < rules.min_bytes) {
    return absl::FailedPreconditionError(what + " " + path + " holds " + std::to_string(text.size()) +
                                         " bytes: at least " + std::to_string(rules.min_bytes) +
                                         " are needed (e.g. `openssl rand -hex 32 > " + path + "`)");
  }
  return text;
}

}  // namespace tandem
