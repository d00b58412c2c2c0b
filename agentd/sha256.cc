#include "agentd/sha256.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

namespace tandem::agentd {
namespace {

struct MdCtxDeleter {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};

std::string ToHex(const unsigned char* d, unsigned n) {
  static const char* kDigits = "0123456789abcdef";
  std::string out(n * 2, '0');
  for (unsigned i = 0; i < n; ++i) {
    out[2 * i] = kDigits[d[i] >> 4];
    out[2 * i + 1] = kDigits[d[i] & 15];
  }
  return out;
}

}  // namespace

std::string Sha256Hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  EVP_Digest(data.data(), data.size(), md, &n, EVP_sha256(), nullptr);
  return ToHex(md, n);
}

absl::StatusOr<std::string> Sha256File(const std::string& path, uint64_t* bytes_read,
                                       const std::function<void(uint64_t)>& on_chunk,
                                       const std::atomic<bool>* cancel) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError("open " + path + ": " + std::strerror(errno));
  // Tell the kernel we read front to back, so it reads ahead aggressively.
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  std::unique_ptr<EVP_MD_CTX, MdCtxDeleter> ctx(EVP_MD_CTX_new());
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  std::vector<unsigned char> buf(kHashChunkBytes);
  uint64_t total = 0;
  absl::Status st;
  while (true) {
    if (cancel && cancel->load(std::memory_order_relaxed)) {
      st = absl::CancelledError("hashing cancelled");
      break;
    }
    // Fill the whole chunk (read() may return less) so progress moves in 4 MiB steps.
    size_t filled = 0;
    while (filled < buf.size()) {
      ssize_t r = ::read(fd, buf.data() + filled, buf.size() - filled);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) {
        st = absl::DataLossError("read " + path + ": " + std::strerror(errno));
        break;
      }
      if (r == 0) break;
      filled += static_cast<size_t>(r);
    }
    if (!st.ok()) break;
    if (filled == 0) break;
    EVP_DigestUpdate(ctx.get(), buf.data(), filled);
    total += filled;
    if (on_chunk) on_chunk(filled);
    if (filled < buf.size()) break;
  }
  ::close(fd);
  if (!st.ok()) return st;
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  EVP_DigestFinal_ex(ctx.get(), md, &n);
  if (bytes_read) *bytes_read = total;
  return ToHex(md, n);
}

}  // namespace tandem::agentd
