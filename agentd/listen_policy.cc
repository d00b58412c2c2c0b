#include "agentd/listen_policy.h"

#include "common/net_address.h"

namespace tandem::agentd {

absl::StatusOr<ListenDecision> DecideListen(const std::string& requested, bool authenticated, bool insecure_flag) {
  ListenDecision d;
  d.address = !requested.empty() ? requested : authenticated ? kDefaultListen : kLoopbackListen;
  if (authenticated || IsLoopbackHost(d.address)) return d;
  if (!insecure_flag) {
    return absl::FailedPreconditionError(
        "refusing to listen on " + d.address +
        " without authentication: anyone who reaches it could load models and read this node's facts. Give "
        "--token-file PATH (and --tls-cert/--tls-key/--tls-ca), listen on 127.0.0.1, or pass --insecure");
  }
  d.insecure = true;
  return d;
}

}  // namespace tandem::agentd
