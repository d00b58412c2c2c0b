#include "engine/comm/store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tandem::engine {

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(std::chrono::milliseconds d) { return static_cast<double>(d.count()) / 1000.0; }

absl::Status KeyTimeout(const std::string& key, std::chrono::milliseconds timeout,
                        const std::string& store) {
  return absl::DeadlineExceededError(absl::StrCat("rendezvous key '", key, "' did not appear in ",
                                                  store, " within ", Seconds(timeout), " s"));
}

}  // namespace

absl::Status Store::Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::vector<std::string> missing;
  for (const auto& key : keys) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() < 0) left = std::chrono::milliseconds(0);
    auto value = Get(key, left);
    if (!value.ok()) {
      if (!absl::IsDeadlineExceeded(value.status())) return value.status();
      missing.push_back(key);
    }
  }
  if (missing.empty()) return absl::OkStatus();
  if (missing.size() == 1) return KeyTimeout(missing[0], timeout, Describe());
  return absl::DeadlineExceededError(
      absl::StrCat("rendezvous keys '", absl::StrJoin(missing, "', '"), "' did not appear in ",
                   Describe(), " within ", Seconds(timeout), " s"));
}

// ---- MemoryStore ----

absl::Status MemoryStore::Set(const std::string& key, const std::string& value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    values_[key] = value;
  }
  cv_.notify_all();
  return absl::OkStatus();
}

absl::StatusOr<std::string> MemoryStore::Get(const std::string& key,
                                             std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  bool found = cv_.wait_for(lock, timeout, [&] { return values_.count(key) > 0; });
  if (!found) return KeyTimeout(key, timeout, Describe());
  return values_[key];
}

// ---- FileStore ----

FileStore::FileStore(std::string dir) : dir_(std::move(dir)) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);  // errors surface at the first Set
}

std::string FileStore::PathFor(const std::string& key) const {
  std::string name;
  for (unsigned char c : key) {
    if (std::isalnum(c) || c == '.' || c == '_' || c == '-') {
      name.push_back(static_cast<char>(c));
    } else {
      static const char* kHex = "0123456789ABCDEF";
      name.push_back('%');
      name.push_back(kHex[c >> 4]);
      name.push_back(kHex[c & 15]);
    }
  }
  // A leading '.' would collide with the temporary files and hide the key from `ls`.
  if (!name.empty() && name[0] == '.') name = "%2E" + name.substr(1);
  return dir_ + "/" + name;
}

absl::Status FileStore::Set(const std::string& key, const std::string& value) {
  static std::atomic<uint64_t> counter{0};
  const std::string path = PathFor(key);
  const std::string tmp = absl::StrCat(dir_, "/.tmp.", getpid(), ".", counter.fetch_add(1));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("rendezvous store: cannot create ", tmp, ": ", std::strerror(errno)));
  }
  size_t done = 0;
  while (done < value.size()) {
    ssize_t n = ::write(fd, value.data() + done, value.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return absl::UnavailableError(
          absl::StrCat("rendezvous store: cannot write ", tmp, ": ", std::strerror(err)));
    }
    done += static_cast<size_t>(n);
  }
  ::fsync(fd);
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return absl::UnavailableError(absl::StrCat("rendezvous store: cannot rename ", tmp, " to ",
                                               path, ": ", std::strerror(err)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> FileStore::Get(const std::string& key,
                                           std::chrono::milliseconds timeout) {
  const std::string path = PathFor(key);
  const auto deadline = Clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  while (true) {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::ostringstream data;
      data << in.rdbuf();
      return data.str();
    }
    if (Clock::now() >= deadline) return KeyTimeout(key, timeout, Describe());
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
}

// ---- PrefixStore ----

PrefixStore::PrefixStore(Store& base, std::string prefix)
    : base_(base), prefix_(std::move(prefix)) {
  while (!prefix_.empty() && prefix_.back() == '/') prefix_.pop_back();
}

absl::Status PrefixStore::Set(const std::string& key, const std::string& value) {
  return base_.Set(Key(key), value);
}

absl::StatusOr<std::string> PrefixStore::Get(const std::string& key,
                                             std::chrono::milliseconds timeout) {
  return base_.Get(Key(key), timeout);
}

absl::Status PrefixStore::Wait(const std::vector<std::string>& keys,
                               std::chrono::milliseconds timeout) {
  std::vector<std::string> full;
  full.reserve(keys.size());
  for (const auto& k : keys) full.push_back(Key(k));
  return base_.Wait(full, timeout);
}

std::string PrefixStore::Describe() const {
  return absl::StrCat("prefix ", prefix_, "/ of ", base_.Describe());
}

std::string GenerationPrefix(uint64_t generation) { return absl::StrCat("gen", generation); }

}  // namespace tandem::engine
