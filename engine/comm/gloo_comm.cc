#include "engine/comm/gloo_comm.h"

#include <net/if.h>
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log.h"
#include "common/status.h"
#include "engine/comm/gloo_store.h"
#include "engine/comm/local_comm.h"
#include "gloo/allreduce.h"
#include "gloo/barrier.h"
#include "gloo/broadcast.h"
#include "gloo/common/error.h"
#include "gloo/gather.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/transport/tcp/device.h"
#include "gloo/transport/unbound_buffer.h"
#include "gloo/types.h"

namespace tandem::engine {

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(std::chrono::milliseconds d) { return static_cast<double>(d.count()) / 1000.0; }
double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}
std::string FormatSeconds(double s) { return absl::StrFormat("%.3f", s); }

// A rendezvous context that can be torn down from another thread.
//
// Gloo has no public "abort": tcp::Context::signalException (fail every pending send/recv and
// close every pair) is protected, and its header is not installed by Debian. But Gloo calls it
// itself whenever a wait on an unbound buffer times out. So we post a receive on a slot that no
// collective uses and wait for it for 1 ms: the timeout makes Gloo signal the whole transport
// context, and every pending operation of the collective thread throws within milliseconds.
// Only public API is used; Gloo allows unbound buffers of one context on several threads.
class AbortableContext final : public gloo::rendezvous::Context {
 public:
  using gloo::rendezvous::Context::Context;

  void SignalException() {
    // Far above the slots of collectives (Slot::build puts a small prefix in the top bits).
    constexpr uint64_t kAbortSlot = 0xFFFFFFFFFFFFull;
    char byte = 0;
    // Posting on a pair that is already closed throws at once without signalling the others,
    // so try each peer until one wait has timed out (then every pair is closed).
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      try {
        auto buffer = createUnboundBuffer(&byte, 1);
        buffer->recv(peer, kAbortSlot);
        buffer->waitRecv(std::chrono::milliseconds(1));
      } catch (const std::exception& e) {
        // "Application timeout caused pair closure": Gloo signalled the whole context.
        if (std::string(e.what()).find("Timed out") != std::string::npos) return;
      }
    }
  }
};

bool ContainsNoCase(const std::string& text, const std::string& word) {
  auto lower = [](std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  return lower(text).find(lower(word)) != std::string::npos;
}

void IgnoreSigpipeOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction old {};
    if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) {
      signal(SIGPIPE, SIG_IGN);
    }
  });
}

class GlooComm final : public Comm {
 public:
  GlooComm(std::shared_ptr<AbortableContext> context,
           std::shared_ptr<gloo::transport::Device> device, std::chrono::milliseconds timeout,
           size_t direct_max_bytes)
      : context_(std::move(context)),
        device_(std::move(device)),
        timeout_(timeout),
        direct_max_bytes_(direct_max_bytes) {}

  ~GlooComm() override {
    // Pairs close with the context; the device (and its event-loop thread) goes last.
    context_.reset();
    device_.reset();
  }

  int rank() const override { return context_->rank; }
  int world_size() const override { return context_->size; }
  std::string transport() const override { return "gloo/tcp"; }
  bool aborted() const override { return aborted_.load(); }

  absl::Status AllReduceSum(float* data, size_t n) override {
    if (n == 0) return CheckUsable();
    const bool direct =
        n * sizeof(float) * static_cast<size_t>(world_size() - 1) <= direct_max_bytes_;
    return Run(absl::StrCat("all-reduce of ", n, " floats"), [&](uint32_t tag) {
      if (direct) {
        DirectAllReduce(data, n, tag);
        return;
      }
      gloo::AllreduceOptions opts(context_);
      opts.setOutput(data, n);
      opts.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
      opts.setTag(tag);
      opts.setTimeout(timeout_);
      gloo::allreduce(opts);
    });
  }

  absl::Status Broadcast(void* data, size_t nbytes, int root) override {
    RETURN_IF_ERROR(CheckRoot(root));
    if (nbytes == 0) return CheckUsable();
    return Run(absl::StrCat("broadcast of ", nbytes, " bytes from rank ", root), [&](uint32_t tag) {
      gloo::BroadcastOptions opts(context_);
      opts.setOutput(static_cast<uint8_t*>(data), nbytes);
      opts.setRoot(root);
      opts.setTag(tag);
      opts.setTimeout(timeout_);
      gloo::broadcast(opts);
    });
  }

  absl::Status Gather(const float* send, size_t n, float* recv, int root) override {
    RETURN_IF_ERROR(CheckRoot(root));
    if (rank() == root && recv == nullptr && n > 0) {
      return absl::InvalidArgumentError("gather: recv is null on the root");
    }
    if (n == 0) return CheckUsable();
    return Run(absl::StrCat("gather of ", n, " floats to rank ", root), [&](uint32_t tag) {
      gloo::GatherOptions opts(context_);
      // Gloo only reads the input; its API takes a non-const pointer.
      opts.setInput(const_cast<float*>(send), n);
      if (rank() == root) opts.setOutput(recv, n * static_cast<size_t>(world_size()));
      opts.setRoot(root);
      opts.setTag(tag);
      opts.setTimeout(timeout_);
      gloo::gather(opts);
    });
  }

  absl::Status Barrier() override {
    return Run("barrier", [&](uint32_t tag) {
      gloo::BarrierOptions opts(context_);
      opts.setTag(tag);
      opts.setTimeout(timeout_);
      gloo::barrier(opts);
    });
  }

  void Abort(const std::string& reason) override {
    if (!MarkAborted(reason, /*by_caller=*/true)) return;
    TLOG(WARN) << "gloo comm rank " << rank() << " of " << world_size() << " aborted: " << reason;
    {
      // The direct all-reduce's own buffers are woken first: that does not depend on any pair's
      // state. (SignalException cannot signal the context when every peer's pair is already
      // closed; a receive still waiting would then wait out its deadline.)
      std::lock_guard<std::mutex> lock(inflight_mu_);
      if (inflight_recv_ != nullptr) inflight_recv_->abortWaitRecv();
      if (inflight_send_ != nullptr) inflight_send_->abortWaitSend();
    }
    context_->SignalException();
  }

 private:
  static constexpr uint8_t kDirectSlotPrefix = 0x7a;  // not one of Gloo's algorithm prefixes

  // Small all-reduce: every rank sends its whole vector to every peer, then adds the world_size
  // vectors in rank order. One exchange instead of the ring's 2 (W - 1) steps (each step is a
  // notify + data round trip through Gloo's event-loop thread): on loopback this halves the
  // latency of per-layer all-reduces 3-4x (engine/comm/README.md). And every rank adds the same
  // numbers in the same order, so all ranks hold bitwise the same result.
  void DirectAllReduce(float* data, size_t n, uint32_t tag) {
    const int world = world_size();
    const int me = rank();
    const size_t bytes = n * sizeof(float);
    direct_scratch_.resize(static_cast<size_t>(world) *
                           n);  // rank r's vector at [r * n, r * n + n)
    float* mine = direct_scratch_.data() + static_cast<size_t>(me) * n;
    std::memcpy(mine, data, bytes);
    const uint64_t slot = gloo::Slot::build(kDirectSlotPrefix, tag);
    auto all = context_->createUnboundBuffer(direct_scratch_.data(),
                                             direct_scratch_.size() * sizeof(float));
    auto send = context_->createUnboundBuffer(mine, bytes);
    // Abort wakes these waits from another thread; it may have come just before they were listed.
    InflightBuffers listed(*this, all.get(), send.get());
    if (aborted_.load()) throw gloo::IoException("collective aborted before it started");
    for (int peer = 0; peer < world; ++peer) {
      if (peer != me) all->recv(peer, slot, static_cast<size_t>(peer) * bytes, bytes);
    }
    for (int peer = 0; peer < world; ++peer) {
      if (peer != me) send->send(peer, slot);
    }
    const auto deadline = Clock::now() + timeout_;
    auto left = [&] {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      return std::max(ms, std::chrono::milliseconds(1));
    };
    for (int i = 0; i < world - 1; ++i) {
      if (!all->waitRecv(left())) throw gloo::IoException("receive aborted");
    }
    for (int i = 0; i < world - 1; ++i) {
      if (!send->waitSend(left())) throw gloo::IoException("send aborted");
    }
    const float* v = direct_scratch_.data();
    for (size_t i = 0; i < n; ++i) {
      float sum = v[i];
      for (int r = 1; r < world; ++r) sum += v[static_cast<size_t>(r) * n + i];
      data[i] = sum;
    }
  }

  // Lists the direct all-reduce's buffers for Abort while they are in use (unlisted on scope exit,
  // before they are destroyed).
  class InflightBuffers {
   public:
    InflightBuffers(GlooComm& c, gloo::transport::UnboundBuffer* recv, gloo::transport::UnboundBuffer* send)
        : c_(c) {
      std::lock_guard<std::mutex> lock(c_.inflight_mu_);
      c_.inflight_recv_ = recv;
      c_.inflight_send_ = send;
    }
    ~InflightBuffers() {
      std::lock_guard<std::mutex> lock(c_.inflight_mu_);
      c_.inflight_recv_ = nullptr;
      c_.inflight_send_ = nullptr;
    }
    InflightBuffers(const InflightBuffers&) = delete;
    InflightBuffers& operator=(const InflightBuffers&) = delete;

   private:
    GlooComm& c_;
  };

  absl::Status CheckRoot(int root) const {
    if (root < 0 || root >= world_size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("root ", root, " out of range for world size ", world_size()));
    }
    return absl::OkStatus();
  }

  absl::Status AbortedStatus() const {
    std::lock_guard<std::mutex> lock(state_mu_);
    return absl::FailedPreconditionError(absl::StrCat("comm aborted: ", reason_));
  }

  absl::Status CheckUsable() const { return aborted_.load() ? AbortedStatus() : absl::OkStatus(); }

  // Returns true when this call aborted the comm (false: it already was).
  bool MarkAborted(const std::string& reason, bool by_caller) {
    std::lock_guard<std::mutex> lock(state_mu_);
    if (aborted_.load()) return false;
    reason_ = reason;
    aborted_by_caller_ = by_caller;
    aborted_.store(true);
    return true;
  }

  // Runs one collective: serialised, tagged, exceptions turned into a Status that says what
  // failed, where and after how long.
  template <typename Fn>
  absl::Status Run(const std::string& what, Fn&& fn) {
    std::lock_guard<std::mutex> op_lock(op_mu_);
    if (aborted_.load()) return AbortedStatus();
    // Every rank issues the same sequence of collectives, so the counters agree; a rank that
    // skipped one then never matches and the mismatch ends at the deadline, not in garbage.
    const uint32_t tag = next_tag_++;
    const auto start = Clock::now();
    std::string error;
    try {
      fn(tag);
      return absl::OkStatus();
    } catch (const std::exception& e) {
      error = e.what();
    } catch (...) {
      error = "unknown exception";
    }
    const double elapsed = SecondsSince(start);
    const std::string where = absl::StrCat("(rank ", rank(), " of ", world_size(), ")");
    absl::Status st;
    {
      std::lock_guard<std::mutex> lock(state_mu_);
      if (aborted_.load() && aborted_by_caller_) {
        st = absl::AbortedError(absl::StrCat(what, " interrupted after ", FormatSeconds(elapsed),
                                             " s ", where, ": comm aborted: ", reason_));
      }
    }
    if (st.ok()) {
      const bool timed_out = ContainsNoCase(error, "timeout") ||
                             ContainsNoCase(error, "timed out") ||
                             elapsed >= 0.95 * Seconds(timeout_);
      if (timed_out) {
        st = absl::DeadlineExceededError(absl::StrCat(what, " did not complete within ",
                                                      Seconds(timeout_), " s ", where,
                                                      "; peer lost? (gloo: ", error, ")"));
      } else {
        st = absl::UnavailableError(
            absl::StrCat(what, " failed after ", FormatSeconds(elapsed), " s ", where,
                         ": connection to a peer lost (gloo: ", error, ")"));
      }
      MarkAborted(std::string(st.message()), /*by_caller=*/false);
      TLOG(ERROR) << st.message();
      // Gloo closed the failing pair (all pairs on a timeout); close the rest too, so that the
      // other peers fail now rather than at their own deadline.
      context_->SignalException();
    }
    return st;
  }

  std::shared_ptr<AbortableContext> context_;
  std::shared_ptr<gloo::transport::Device> device_;
  const std::chrono::milliseconds timeout_;
  const size_t direct_max_bytes_;
  std::mutex op_mu_;  // one collective at a time
  uint32_t next_tag_ = 0;
  std::vector<float> direct_scratch_;  // DirectAllReduce: all ranks' vectors
  std::mutex inflight_mu_;             // guards the two below (Abort reads them from any thread)
  gloo::transport::UnboundBuffer* inflight_recv_ = nullptr;
  gloo::transport::UnboundBuffer* inflight_send_ = nullptr;
  mutable std::mutex state_mu_;
  std::atomic<bool> aborted_{false};
  bool aborted_by_caller_ = false;
  std::string reason_;
};

// Where to listen: GLOO_SOCKET_IFNAME wins; otherwise an interface name or a hostname/address.
gloo::transport::tcp::attr DeviceAttr(const std::string& hostname_or_iface,
                                      std::string* described) {
  gloo::transport::tcp::attr attr;
  const char* env = std::getenv("GLOO_SOCKET_IFNAME");
  if (env != nullptr && env[0] != '\0') {
    attr.iface = env;
    *described = absl::StrCat("interface ", env, " (GLOO_SOCKET_IFNAME)");
  } else if (!hostname_or_iface.empty() && if_nametoindex(hostname_or_iface.c_str()) != 0) {
    attr.iface = hostname_or_iface;
    *described = absl::StrCat("interface ", hostname_or_iface);
  } else {
    attr.hostname = hostname_or_iface.empty() ? "127.0.0.1" : hostname_or_iface;
    *described = absl::StrCat("address ", attr.hostname);
  }
  return attr;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Comm>> CreateGlooComm(const GlooCommOptions& options) {
  if (options.world_size == 1 && options.rank == 0) return std::unique_ptr<Comm>(new LocalComm());
  if (options.store == nullptr) return absl::InvalidArgumentError("gloo comm: no rendezvous store");
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("gloo comm: rank ", options.rank,
                                                   " invalid for world size ", options.world_size));
  }
  if (options.timeout.count() <= 0 || options.connect_timeout.count() <= 0) {
    return absl::InvalidArgumentError("gloo comm: timeouts must be positive");
  }
  IgnoreSigpipeOnce();
  const std::string who = absl::StrCat("rank ", options.rank, " of ", options.world_size);
  const auto start = Clock::now();

  std::string where;
  auto attr = DeviceAttr(options.hostname_or_iface, &where);
  // Gloo 0.5 dereferences a null pointer on an unknown interface or an unresolvable host: check
  // both here, so a typo in the config is an error message rather than a crash.
  if (!attr.iface.empty() && if_nametoindex(attr.iface.c_str()) == 0) {
    return absl::UnavailableError(absl::StrCat("gloo comm ", who, ": no network ", where));
  }
  if (attr.iface.empty()) {
    struct addrinfo hints {};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    struct addrinfo* found = nullptr;
    int rc = getaddrinfo(attr.hostname.c_str(), nullptr, &hints, &found);
    if (rc != 0 || found == nullptr) {
      return absl::UnavailableError(absl::StrCat("gloo comm ", who, ": cannot resolve ", where,
                                                 ": ", rc != 0 ? gai_strerror(rc) : "no address"));
    }
    freeaddrinfo(found);
  }
  std::shared_ptr<gloo::transport::Device> device;
  try {
    device = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("gloo comm ", who, ": cannot open a TCP device on ", where, ": ", e.what()));
  }

  auto context = std::make_shared<AbortableContext>(options.rank, options.world_size);
  context->setTimeout(options.connect_timeout);
  GlooStoreAdapter adapter(*options.store, options.connect_timeout);
  try {
    context->connectFullMesh(adapter, device);
  } catch (const std::exception& e) {
    absl::Status store_error = adapter.first_error();
    if (!store_error.ok()) {
      return absl::Status(
          store_error.code(),
          absl::StrCat("gloo comm ", who, " could not rendezvous: ", store_error.message()));
    }
    return absl::DeadlineExceededError(absl::StrCat("gloo comm ", who,
                                                    " could not connect to its peers within ",
                                                    Seconds(options.connect_timeout), " s through ",
                                                    options.store->Describe(), ": ", e.what()));
  }
  context->setTimeout(options.timeout);
  TLOG(INFO) << "gloo comm " << who << " connected on " << device->str() << " in "
             << FormatSeconds(SecondsSince(start)) << " s";
  return std::unique_ptr<Comm>(new GlooComm(std::move(context), std::move(device), options.timeout,
                                            options.direct_allreduce_max_bytes));
}

}  // namespace tandem::engine
