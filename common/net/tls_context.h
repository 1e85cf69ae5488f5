// Builds OpenSSL contexts for control connections from a TlsConfig.
// Internal to tandem_net (includes Asio SSL). Thread rule: the returned
// context is shared read-only by every connection of a server or client.
#pragma once

#include <boost/asio/ssl/context.hpp>
#include <memory>

#include "common/base/status.h"
#include "common/net/rpc_config.h"

namespace tandem::net::internal {

// TLS 1.2+ server context: cert + key; with ca_file, clients must present a
// certificate signed by it. InvalidArgument when a file cannot be loaded.
StatusOr<std::shared_ptr<boost::asio::ssl::context>> MakeServerTlsContext(const TlsConfig& tls);

// TLS 1.2+ client context: verifies the server against ca_file; presents
// cert_file/key_file when set (mutual TLS).
StatusOr<std::shared_ptr<boost::asio::ssl::context>> MakeClientTlsContext(const TlsConfig& tls);

}  // namespace tandem::net::internal
