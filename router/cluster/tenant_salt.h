// The prefix-cache salt of a tenant (docs/protocol.md, Tenants):
// hex(SHA-256("tandem-tenant:" + tenant_id)); an empty tenant id is "anonymous".
// Thread rule: a pure function; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace tandem::router::cluster {

std::string TenantSalt(std::string_view tenant_id);

}  // namespace tandem::router::cluster
