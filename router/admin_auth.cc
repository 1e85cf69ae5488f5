#include "router/admin_auth.h"

#include <vector>

namespace tandem::router {

AdminAuth::AdminAuth(const std::string& admin_key) {
  if (!admin_key.empty()) key_.emplace(std::vector<ApiKeyEntry>{{admin_key, "admin"}});
}

bool AdminAuth::Check(std::string_view authorization_header) const {
  return key_.has_value() && key_->Authenticate(authorization_header).has_value();
}

}  // namespace tandem::router
