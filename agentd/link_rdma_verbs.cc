#include "agentd/link_rdma_verbs.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"

#ifdef TANDEM_HAVE_IBVERBS
#include <infiniband/verbs.h>
#endif

namespace tandem::agentd {

#ifdef TANDEM_HAVE_IBVERBS
namespace {

// verbs calls report failure through errno (creators return nullptr) or return the errno value
// itself (ibv_modify_qp, ibv_post_send, ibv_query_*).
absl::Status VerbsError(const std::string& call, int err) {
  return absl::UnavailableError(absl::StrCat(call, ": ", std::strerror(err), " (errno ", err, ")"));
}

uint32_t MtuBytes(ibv_mtu mtu) { return 128u << static_cast<int>(mtu); }  // IBV_MTU_256 is 1

ibv_mtu MtuEnum(uint32_t bytes) {
  if (bytes >= 4096) return IBV_MTU_4096;
  if (bytes >= 2048) return IBV_MTU_2048;
  if (bytes >= 1024) return IBV_MTU_1024;
  if (bytes >= 512) return IBV_MTU_512;
  return IBV_MTU_256;
}

}  // namespace

// Members in creation order: destroyed in reverse, the queue pair before the CQ it uses, the
// memory region before its buffer and PD, the context last.
struct RdmaQueuePair::Objects {
  struct CloseContext {
    void operator()(ibv_context* c) const { ibv_close_device(c); }
  };
  struct DeallocPd {
    void operator()(ibv_pd* p) const { ibv_dealloc_pd(p); }
  };
  struct FreeBuffer {
    void operator()(char* b) const { std::free(b); }
  };
  struct DeregMr {
    void operator()(ibv_mr* m) const { ibv_dereg_mr(m); }
  };
  struct DestroyCq {
    void operator()(ibv_cq* c) const { ibv_destroy_cq(c); }
  };
  struct DestroyQp {
    void operator()(ibv_qp* q) const { ibv_destroy_qp(q); }
  };

  RdmaPortChoice port;
  std::unique_ptr<ibv_context, CloseContext> context;
  std::unique_ptr<ibv_pd, DeallocPd> pd;
  std::unique_ptr<char, FreeBuffer> buffer;
  uint64_t buffer_bytes = 0;
  std::unique_ptr<ibv_mr, DeregMr> mr;
  std::unique_ptr<ibv_cq, DestroyCq> cq;
  std::unique_ptr<ibv_qp, DestroyQp> qp;
  ibv_gid gid{};
  ibv_mtu mtu = IBV_MTU_1024;
  uint32_t psn = 0;
  uint64_t remote_addr = 0;
  uint64_t remote_len = 0;
  uint32_t remote_rkey = 0;
};

RdmaQueuePair::RdmaQueuePair(std::unique_ptr<Objects> o) : o_(std::move(o)) {}
RdmaQueuePair::~RdmaQueuePair() = default;

absl::StatusOr<std::unique_ptr<RdmaQueuePair>> RdmaQueuePair::Open(const RdmaPortChoice& port, uint64_t buffer_bytes,
                                                                   int window) {
  auto o = std::make_unique<Objects>();
  o->port = port;
  {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (list == nullptr) return VerbsError("ibv_get_device_list", errno);
    for (int i = 0; i < n && !o->context; ++i) {
      if (port.device == ibv_get_device_name(list[i])) {
        o->context.reset(ibv_open_device(list[i]));
        if (!o->context) {
          const int err = errno;
          ibv_free_device_list(list);
          return VerbsError(absl::StrCat("ibv_open_device(", port.device, ")"), err);
        }
      }
    }
    ibv_free_device_list(list);
    if (!o->context) {
      return absl::NotFoundError(absl::StrCat("libibverbs does not list ", port.device, " (sysfs does)"));
    }
  }
  ibv_port_attr attr{};
  if (int err = ibv_query_port(o->context.get(), static_cast<uint8_t>(port.port), &attr); err != 0) {
    return VerbsError(absl::StrCat("ibv_query_port(", port.device, " port ", port.port, ")"), err);
  }
  if (attr.state != IBV_PORT_ACTIVE) {
    return absl::FailedPreconditionError(absl::StrCat(port.device, " port ", port.port, " is not active (",
                                                      ibv_port_state_str(attr.state), ")"));
  }
  o->mtu = attr.active_mtu;
  if (int err = ibv_query_gid(o->context.get(), static_cast<uint8_t>(port.port), static_cast<int>(port.gid_index),
                              &o->gid);
      err != 0) {
    return VerbsError(absl::StrCat("ibv_query_gid(index ", port.gid_index, ")"), err);
  }
  o->pd.reset(ibv_alloc_pd(o->context.get()));
  if (!o->pd) return VerbsError("ibv_alloc_pd", errno);
  o->buffer.reset(static_cast<char*>(std::aligned_alloc(4096, buffer_bytes)));
  if (!o->buffer) return absl::ResourceExhaustedError(absl::StrCat("no memory for a ", buffer_bytes, "-byte buffer"));
  std::memset(o->buffer.get(), 0x5a, buffer_bytes);
  o->buffer_bytes = buffer_bytes;
  o->mr.reset(ibv_reg_mr(o->pd.get(), o->buffer.get(), buffer_bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
  if (!o->mr) return VerbsError("ibv_reg_mr", errno);
  o->cq.reset(ibv_create_cq(o->context.get(), window * 2, nullptr, nullptr, 0));
  if (!o->cq) return VerbsError("ibv_create_cq", errno);
  ibv_qp_init_attr init{};
  init.send_cq = o->cq.get();
  init.recv_cq = o->cq.get();
  init.qp_type = IBV_QPT_RC;
  init.sq_sig_all = 1;
  init.cap.max_send_wr = static_cast<uint32_t>(window);
  init.cap.max_recv_wr = 1;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  o->qp.reset(ibv_create_qp(o->pd.get(), &init));
  if (!o->qp) return VerbsError("ibv_create_qp", errno);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = static_cast<uint8_t>(port.port);
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  if (int err = ibv_modify_qp(o->qp.get(), &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
      err != 0) {
    return VerbsError("ibv_modify_qp(INIT)", err);
  }
  o->psn = std::random_device{}() & 0xffffff;
  return std::unique_ptr<RdmaQueuePair>(new RdmaQueuePair(std::move(o)));
}

v1::LinkRdmaQp RdmaQueuePair::Info() const {
  v1::LinkRdmaQp info;
  info.set_qp_num(o_->qp->qp_num);
  info.set_psn(o_->psn);
  info.set_gid(std::string(reinterpret_cast<const char*>(o_->gid.raw), sizeof(o_->gid.raw)));
  info.set_gid_index(o_->port.gid_index);
  info.set_rkey(o_->mr->rkey);
  info.set_addr(reinterpret_cast<uintptr_t>(o_->buffer.get()));
  info.set_len(o_->buffer_bytes);
  info.set_mtu(MtuBytes(o_->mtu));
  info.set_device(o_->port.device);
  info.set_port(o_->port.port);
  return info;
}

absl::Status RdmaQueuePair::ReadyToReceive(const v1::LinkRdmaQp& remote) {
  if (remote.gid().size() != sizeof(ibv_gid::raw)) {
    return absl::InvalidArgumentError(absl::StrCat("the other end's GID has ", remote.gid().size(), " bytes, not 16"));
  }
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = std::min(o_->mtu, MtuEnum(remote.mtu()));
  a.dest_qp_num = remote.qp_num();
  a.rq_psn = remote.psn() & 0xffffff;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;  // RoCE addresses by GID: every packet carries the GRH
  std::memcpy(a.ah_attr.grh.dgid.raw, remote.gid().data(), sizeof(a.ah_attr.grh.dgid.raw));
  a.ah_attr.grh.sgid_index = static_cast<uint8_t>(o_->port.gid_index);
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.port_num = static_cast<uint8_t>(o_->port.port);
  if (int err = ibv_modify_qp(o_->qp.get(), &a,
                              IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
      err != 0) {
    return VerbsError("ibv_modify_qp(RTR)", err);
  }
  o_->remote_addr = remote.addr();
  o_->remote_len = remote.len();
  o_->remote_rkey = remote.rkey();
  return absl::OkStatus();
}

absl::Status RdmaQueuePair::ReadyToSend() {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;  // 4.096 us x 2^14 = 67 ms per try
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.sq_psn = o_->psn;
  a.max_rd_atomic = 1;
  if (int err = ibv_modify_qp(o_->qp.get(), &a,
                              IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                  IBV_QP_MAX_QP_RD_ATOMIC);
      err != 0) {
    return VerbsError("ibv_modify_qp(RTS)", err);
  }
  return absl::OkStatus();
}

absl::Status RdmaQueuePair::PostWrite(uint64_t wr_id, uint64_t offset, uint32_t bytes) {
  if (offset + bytes > o_->buffer_bytes || offset + bytes > o_->remote_len) {
    return absl::OutOfRangeError(absl::StrCat("write of ", bytes, " at ", offset, " passes a buffer's end"));
  }
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(o_->buffer.get()) + offset;
  sge.length = bytes;
  sge.lkey = o_->mr->lkey;
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = o_->remote_addr + offset;
  wr.wr.rdma.rkey = o_->remote_rkey;
  ibv_send_wr* bad = nullptr;
  if (int err = ibv_post_send(o_->qp.get(), &wr, &bad); err != 0) return VerbsError("ibv_post_send", err);
  return absl::OkStatus();
}

absl::Status RdmaQueuePair::Poll(std::vector<Completion>* out) {
  ibv_wc wc[16];
  const int n = ibv_poll_cq(o_->cq.get(), 16, wc);
  if (n < 0) return absl::UnavailableError("ibv_poll_cq failed");
  for (int i = 0; i < n; ++i) {
    Completion c;
    c.wr_id = wc[i].wr_id;
    if (wc[i].status != IBV_WC_SUCCESS) {
      c.error = absl::StrCat("work completion: ", ibv_wc_status_str(wc[i].status), " (vendor error ",
                             wc[i].vendor_err, ")");
    }
    out->push_back(std::move(c));
  }
  return absl::OkStatus();
}

#else  // !TANDEM_HAVE_IBVERBS

struct RdmaQueuePair::Objects {};
RdmaQueuePair::RdmaQueuePair(std::unique_ptr<Objects> o) : o_(std::move(o)) {}
RdmaQueuePair::~RdmaQueuePair() = default;

absl::StatusOr<std::unique_ptr<RdmaQueuePair>> RdmaQueuePair::Open(const RdmaPortChoice&, uint64_t, int) {
  return absl::UnimplementedError("rdma: not built in (the agent was built without libibverbs)");
}
// Unreachable: Open never makes one.
v1::LinkRdmaQp RdmaQueuePair::Info() const { return {}; }
absl::Status RdmaQueuePair::ReadyToReceive(const v1::LinkRdmaQp&) { return Open({}, 0, 0).status(); }
absl::Status RdmaQueuePair::ReadyToSend() { return Open({}, 0, 0).status(); }
absl::Status RdmaQueuePair::PostWrite(uint64_t, uint64_t, uint32_t) { return Open({}, 0, 0).status(); }
absl::Status RdmaQueuePair::Poll(std::vector<Completion>*) { return Open({}, 0, 0).status(); }

#endif

}  // namespace tandem::agentd
