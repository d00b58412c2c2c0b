#include "engine/comm/gloo_store.h"

#include <algorithm>

#include "gloo/common/error.h"

namespace tandem::engine {

void GlooStoreAdapter::Fail(const absl::Status& st) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (first_error_.ok()) first_error_ = st;
  }
  throw gloo::IoException(std::string(st.message()));
}

absl::Status GlooStoreAdapter::first_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return first_error_;
}

void GlooStoreAdapter::set(const std::string& key, const std::vector<char>& data) {
  absl::Status st = store_.Set(key, std::string(data.begin(), data.end()));
  if (!st.ok()) Fail(st);
}

std::vector<char> GlooStoreAdapter::get(const std::string& key) {
  auto value = store_.Get(key, timeout_);
  if (!value.ok()) Fail(value.status());
  return std::vector<char>(value->begin(), value->end());
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys,
                            const std::chrono::milliseconds& timeout) {
  // Gloo passes its context timeout or its 30 s default; ours (the connect timeout) is the cap.
  absl::Status st = store_.Wait(keys, std::min(timeout, timeout_));
  if (!st.ok()) Fail(st);
}

}  // namespace tandem::engine
