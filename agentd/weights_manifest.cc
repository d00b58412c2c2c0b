#include "agentd/weights_manifest.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "agentd/sha256.h"
#include "common/json_integer.h"
#include "common/log.h"
#include "common/status.h"

namespace tandem::agentd {
namespace fs = std::filesystem;

namespace {

// 2: the key holds device, inode and ctime besides size and mtime. A format-1 file (size + mtime
// only) is ignored: a byte flipped with the mtime set back would have matched it.
constexpr int kCacheFormat = 2;
constexpr const char* kCacheFileName = "weights-cache.json";

// What must be unchanged for a cached digest to stand for the file. ctime is the one a writer
// cannot choose: utime()/touch set mtime back, but every write and every utime() moves ctime to
// "now" (only changing the system clock, which needs root, could forge it). Device and inode catch
// a file replaced by another of the same size and times (rename over it, restore from a copy).
struct FileIdentity {
  uint64_t dev = 0;
  uint64_t ino = 0;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  bool operator==(const FileIdentity&) const = default;
};

struct CachedDigest {
  FileIdentity id;
  std::string sha256;
};
using DigestCache = std::map<std::string, CachedDigest>;  // key: absolute path of the data

// One file of the manifest and what is needed to hash it.
struct Job {
  std::string rel;            // '/'-separated, relative to the model folder
  std::string data_path;      // absolute, symlinks resolved: what is read and cached
  std::string symlink_target; // set when the entry itself is a symlink
  FileIdentity id;  // as stat saw it at the walk
  std::string sha256;
  std::string error;
  bool cached = false;
};

DigestCache LoadCache(const std::string& path) {
  DigestCache cache;
  std::ifstream in(path);
  if (!in) return cache;  // first run
  try {
    nlohmann::json j = nlohmann::json::parse(in);
    // Integers through common/json_integer.h (nlohmann would cast a float: undefined behaviour);
    // any other entry makes the cache damaged.
    if (JsonIntegerField(j, "format", 0, kJsonInt64Min, kJsonInt64Max) != kCacheFormat) return cache;
    for (auto& [key, v] : j.at("files").items()) {
      CachedDigest d;
      d.id.dev = static_cast<uint64_t>(JsonIntegerField(v, "dev", std::nullopt, 0, kJsonInt64Max));
      d.id.ino = static_cast<uint64_t>(JsonIntegerField(v, "ino", std::nullopt, 0, kJsonInt64Max));
      d.id.size = static_cast<uint64_t>(JsonIntegerField(v, "size", std::nullopt, 0, kJsonInt64Max));
      d.id.mtime_ns = JsonIntegerField(v, "mtime_ns", std::nullopt, kJsonInt64Min, kJsonInt64Max);
      d.id.ctime_ns = JsonIntegerField(v, "ctime_ns", std::nullopt, kJsonInt64Min, kJsonInt64Max);
      d.sha256 = v.at("sha256").get<std::string>();
      cache[key] = std::move(d);
    }
  } catch (const std::exception& e) {
    // A damaged cache only costs a re-hash; never trust part of it.
    TLOG(WARN) << "ignoring unreadable hash cache " << path << ": " << e.what();
    cache.clear();
  }
  return cache;
}

// Write to a temporary file, fsync it, rename over the old one, fsync the directory: a crash
// leaves either the old cache or the new one, never a torn file.
absl::Status SaveCacheAtomically(const std::string& dir, const std::string& path, const DigestCache& cache) {
  nlohmann::json files = nlohmann::json::object();
  for (const auto& [key, d] : cache) {
    files[key] = {{"dev", d.id.dev},           {"ino", d.id.ino},
                  {"size", d.id.size},         {"mtime_ns", d.id.mtime_ns},
                  {"ctime_ns", d.id.ctime_ns}, {"sha256", d.sha256}};
  }
  const std::string text = nlohmann::json{{"format", kCacheFormat}, {"files", files}}.dump(1);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InternalError("create " + tmp + ": " + std::strerror(errno));
  size_t off = 0;
  while (off < text.size()) {
    ssize_t w = ::write(fd, text.data() + off, text.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      ::close(fd);
      ::unlink(tmp.c_str());
      return absl::InternalError("write " + tmp + ": " + std::strerror(errno));
    }
    off += static_cast<size_t>(w);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return absl::InternalError("fsync " + tmp + ": " + std::strerror(errno));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return absl::InternalError("rename " + tmp + ": " + std::strerror(errno));
  }
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return absl::OkStatus();
}

bool StatData(const std::string& path, Job* job) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    job->error = "stat " + path + ": " + std::strerror(errno);
    return false;
  }
  job->id.dev = static_cast<uint64_t>(st.st_dev);
  job->id.ino = static_cast<uint64_t>(st.st_ino);
  job->id.size = static_cast<uint64_t>(st.st_size);
  job->id.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  job->id.ctime_ns = static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  return true;
}

// The file still has the identity it had at the walk (a write during hashing moves ctime): only
// then is its digest worth remembering.
bool Unchanged(const Job& j) {
  Job now;
  return StatData(j.data_path, &now) && now.id == j.id;
}

// Depth-first walk. Directory symlinks are followed; (device, inode) of every directory entered
// is remembered so that a symlink loop is visited once.
void Walk(const fs::path& dir, const std::string& rel_prefix, std::set<std::pair<dev_t, ino_t>>* seen,
          std::vector<Job>* jobs, std::string* error) {
  struct stat dst {};
  if (::stat(dir.c_str(), &dst) != 0 || !seen->insert({dst.st_dev, dst.st_ino}).second) return;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) {
    *error += (error->empty() ? "" : "; ") + ("cannot list " + dir.string() + ": " + ec.message());
    return;
  }
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const fs::path p = it->path();
    const std::string name = p.filename().string();
    const std::string rel = rel_prefix.empty() ? name : rel_prefix + "/" + name;
    std::error_code e2;
    fs::file_status lst = fs::symlink_status(p, e2);
    Job job;
    job.rel = rel;
    if (fs::is_symlink(lst)) {
      fs::path target = fs::canonical(p, e2);
      if (e2) {
        std::error_code e3;
        job.symlink_target = fs::read_symlink(p, e3).string();
        job.error = "dangling symlink -> " + job.symlink_target;
        jobs->push_back(std::move(job));
        continue;
      }
      if (fs::is_directory(target, e2)) {
        if (name != ".git" && name != ".cache") Walk(target, rel, seen, jobs, error);
        continue;
      }
      if (!fs::is_regular_file(target, e2)) continue;
      job.symlink_target = target.string();
      job.data_path = target.string();
    } else if (fs::is_directory(lst)) {
      if (name == ".git" || name == ".cache") continue;
      Walk(p, rel, seen, jobs, error);
      continue;
    } else if (fs::is_regular_file(lst)) {
      job.data_path = fs::absolute(p, e2).lexically_normal().string();
    } else {
      continue;  // sockets, fifos, devices: not weights
    }
    StatData(job.data_path, &job);
    jobs->push_back(std::move(job));
  }
}

}  // namespace

WeightsHasher::WeightsHasher(std::string state_dir) : state_dir_(std::move(state_dir)) {}

std::string WeightsHasher::cache_path() const {
  return state_dir_.empty() ? "" : (fs::path(state_dir_) / kCacheFileName).string();
}

absl::StatusOr<v1::WeightsManifest> WeightsHasher::Hash(const std::string& model_path, const HashOptions& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  std::error_code ec;
  if (!fs::is_directory(model_path, ec)) return absl::NotFoundError("model folder " + model_path + " does not exist");
  fs::path root = fs::canonical(model_path, ec);
  if (ec) return absl::NotFoundError("model folder " + model_path + ": " + ec.message());

  std::vector<Job> jobs;
  std::set<std::pair<dev_t, ino_t>> seen;
  std::string walk_error;
  Walk(root, "", &seen, &jobs, &walk_error);
  std::sort(jobs.begin(), jobs.end(), [](const Job& a, const Job& b) { return a.rel < b.rel; });

  // Cache hits first: a hit needs the same data path and FileIdentity. opts.use_cache = false
  // (preflight --rehash, verify: full) reads every byte and refreshes the cache.
  DigestCache cache;
  if (!state_dir_.empty() && opts.use_cache) {
    std::lock_guard<std::mutex> lock(cache_mu_);
    cache = LoadCache(cache_path());
  }
  uint64_t bytes_total = 0, cached_bytes = 0;
  uint64_t cached_files = 0;
  std::vector<size_t> todo;
  for (size_t i = 0; i < jobs.size(); ++i) {
    Job& j = jobs[i];
    if (!j.error.empty()) continue;
    bytes_total += j.id.size;
    auto it = cache.find(j.data_path);
    if (it != cache.end() && it->second.id == j.id) {
      j.sha256 = it->second.sha256;
      j.cached = true;
      cached_bytes += j.id.size;
      ++cached_files;
    } else {
      todo.push_back(i);
    }
  }
  // Largest files first, so one big file does not start last and leave the other threads idle.
  std::sort(todo.begin(), todo.end(), [&](size_t a, size_t b) { return jobs[a].id.size > jobs[b].id.size; });

  unsigned threads = opts.threads ? opts.threads : std::max(1u, std::thread::hardware_concurrency());
  // A request may ask for anything; more threads than files or than 64 only add overhead.
  threads = static_cast<unsigned>(std::min<size_t>({threads, 64, std::max<size_t>(1, todo.size())}));

  std::atomic<size_t> next{0};
  std::atomic<uint64_t> bytes_done{cached_bytes}, files_done{cached_files};
  std::atomic<uint64_t> hashed_bytes{0};
  std::atomic<bool> cancel{false};
  std::mutex mu;  // guards current_file and `finished`
  std::condition_variable cv;
  std::string current_file;
  unsigned finished = 0;

  const auto hash_start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads && !todo.empty(); ++t) {
    pool.emplace_back([&] {
      for (size_t k; (k = next.fetch_add(1)) < todo.size() && !cancel.load();) {
        Job& j = jobs[todo[k]];
        {
          std::lock_guard<std::mutex> lock(mu);
          current_file = j.rel;
        }
        uint64_t n = 0;
        auto sha = Sha256File(j.data_path, &n, [&](uint64_t c) {
          bytes_done.fetch_add(c, std::memory_order_relaxed);
          hashed_bytes.fetch_add(c, std::memory_order_relaxed);
        }, &cancel);
        if (sha.ok()) {
          j.sha256 = *sha;
          // The file may have changed between stat and read: report what was hashed, and do not
          // cache a digest whose identity is not the one stat saw (checked below).
          if (n != j.id.size) j.error = "changed while it was hashed (size " + std::to_string(j.id.size) + " -> " +
                                        std::to_string(n) + ")";
        } else if (sha.status().code() != absl::StatusCode::kCancelled) {
          j.error = StatusText(sha.status());
        }
        files_done.fetch_add(1);
      }
      std::lock_guard<std::mutex> lock(mu);
      ++finished;
      cv.notify_all();
    });
  }

  auto progress = [&]() {
    v1::HashProgress p;
    p.set_files_done(files_done.load());
    p.set_files_total(jobs.size());
    p.set_bytes_done(bytes_done.load());
    p.set_bytes_total(bytes_total);
    std::lock_guard<std::mutex> lock(mu);
    p.set_current_file(current_file);
    return p;
  };
  {
    std::unique_lock<std::mutex> lock(mu);
    while (finished < pool.size()) {
      cv.wait_for(lock, opts.progress_interval);
      if (finished >= pool.size()) break;
      lock.unlock();
      if (opts.cancelled && opts.cancelled()) cancel.store(true);
      if (opts.on_progress) opts.on_progress(progress());
      lock.lock();
    }
  }
  for (auto& t : pool) t.join();
  const double hash_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - hash_start).count();
  if (cancel.load() || (opts.cancelled && opts.cancelled())) return absl::CancelledError("hashing cancelled");
  if (opts.on_progress) opts.on_progress(progress());

  // Remember new digests. Re-read the file under the lock: another request may have added some.
  if (!state_dir_.empty() && !todo.empty()) {
    std::lock_guard<std::mutex> lock(cache_mu_);
    DigestCache merged = LoadCache(cache_path());
    for (size_t i : todo) {
      const Job& j = jobs[i];
      if (j.error.empty() && !j.sha256.empty() && Unchanged(j)) merged[j.data_path] = CachedDigest{j.id, j.sha256};
    }
    fs::create_directories(state_dir_, ec);
    absl::Status st = SaveCacheAtomically(state_dir_, cache_path(), merged);
    if (!st.ok()) TLOG(WARN) << "hash cache not saved: " << StatusText(st);
  }

  v1::WeightsManifest m;
  m.set_model_path(model_path);
  uint64_t total = 0;
  for (const Job& j : jobs) {
    v1::FileDigest* f = m.add_files();
    f->set_path(j.rel);
    f->set_size(j.id.size);
    f->set_sha256(j.sha256);
    f->set_symlink_target(j.symlink_target);
    f->set_cached(j.cached);
    f->set_error(j.error);
    if (j.error.empty()) total += j.id.size;
  }
  m.set_total_bytes(total);
  m.set_seconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  const uint64_t hashed = hashed_bytes.load();
  m.set_hashed_bytes_per_second(hashed > 0 && hash_seconds > 0 ? static_cast<double>(hashed) / hash_seconds : 0.0);
  m.set_error(walk_error);
  return m;
}

}  // namespace tandem::agentd
