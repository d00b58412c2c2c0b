#include "agentd/auth.h"

#include "common/log.h"
#include "common/secret_file.h"

namespace tandem::agentd {

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) { return ReadSecretFile(path, "the token file"); }

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  // Compare over the longer length so that a short guess costs as long as a long one.
  const size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

grpc::Status TokenAuth::Check(const grpc::ServerContext& context, const char* method) const {
  if (token_.empty()) return grpc::Status::OK;
  const auto& md = context.client_metadata();
  auto it = md.find("authorization");
  const char* why = "no authorization metadata";
  if (it != md.end()) {
    const std::string_view value(it->second.data(), it->second.size());
    constexpr std::string_view kBearer = "Bearer ";
    if (value.substr(0, kBearer.size()) == kBearer) {
      if (ConstantTimeEquals(value.substr(kBearer.size()), token_)) return grpc::Status::OK;
      why = "wrong token";
    } else {
      why = "authorization is not \"Bearer <token>\"";
    }
  }
  TLOG(WARN) << "rejected " << method << " from " << context.peer() << ": " << why;
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      std::string(why) + " (this agent needs the cluster token: \"authorization: Bearer <token>\")");
}

void TokenAuth::AddTo(grpc::ClientContext* context, const std::string& token) {
  if (!token.empty()) context->AddMetadata("authorization", "Bearer " + token);
}

}  // namespace tandem::agentd
