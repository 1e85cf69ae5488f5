#include "common/net/tls_context.h"

#include <openssl/ssl.h>

namespace tandem::net::internal {
namespace ssl = boost::asio::ssl;
namespace {

Status Check(const boost::system::error_code& ec, const std::string& what) {
  if (!ec) return Status::Ok();
  return InvalidArgumentError("tls: " + what + ": " + ec.message());
}

StatusOr<std::shared_ptr<ssl::context>> MakeContext(ssl::context::method method, const TlsConfig& tls) {
  auto context = std::make_shared<ssl::context>(method);
  boost::system::error_code ec;
  context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                           ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::single_dh_use,
                       ec);
  TANDEM_RETURN_IF_ERROR(Check(ec, "set options"));
  SSL_CTX_set_min_proto_version(context->native_handle(), TLS1_2_VERSION);
  if (!tls.cert_file.empty()) {
    context->use_certificate_chain_file(tls.cert_file, ec);
    TANDEM_RETURN_IF_ERROR(Check(ec, "load cert_file " + tls.cert_file));
    context->use_private_key_file(tls.key_file, ssl::context::pem, ec);
    TANDEM_RETURN_IF_ERROR(Check(ec, "load key_file " + tls.key_file));
  }
  if (!tls.ca_file.empty()) {
    context->load_verify_file(tls.ca_file, ec);
    TANDEM_RETURN_IF_ERROR(Check(ec, "load ca_file " + tls.ca_file));
  }
  return context;
}

}  // namespace

StatusOr<std::shared_ptr<ssl::context>> MakeServerTlsContext(const TlsConfig& tls) {
  TANDEM_ASSIGN_OR_RETURN(auto context, MakeContext(ssl::context::tls_server, tls));
  boost::system::error_code ec;
  if (!tls.ca_file.empty()) {
    context->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert, ec);
  } else {
    context->set_verify_mode(ssl::verify_none, ec);
  }
  TANDEM_RETURN_IF_ERROR(Check(ec, "set verify mode"));
  return context;
}

StatusOr<std::shared_ptr<ssl::context>> MakeClientTlsContext(const TlsConfig& tls) {
  TANDEM_ASSIGN_OR_RETURN(auto context, MakeContext(ssl::context::tls_client, tls));
  boost::system::error_code ec;
  context->set_verify_mode(ssl::verify_peer, ec);
  TANDEM_RETURN_IF_ERROR(Check(ec, "set verify mode"));
  return context;
}

}  // namespace tandem::net::internal
