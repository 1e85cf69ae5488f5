// TLS and mutual TLS over loopback, with a throwaway CA made by the openssl CLI.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "rpc_test_util.h"

namespace tandem::net {
namespace {

using testing::ClientConfig;
using testing::EchoReserve;
using testing::MakeReserve;
using testing::ServerConfig;

namespace fs = std::filesystem;

// Creates ca.pem/key, server.pem/key (SAN 127.0.0.1, localhost), client.pem/key
// signed by the CA, and other_ca.pem (an unrelated CA) in a temp directory.
class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("tandem_tls_" + std::to_string(getpid())));
    fs::create_directories(*dir_);
    std::ofstream(*dir_ / "server.ext") << "subjectAltName=IP:127.0.0.1,DNS:localhost\n";
    std::ofstream(*dir_ / "client.ext") << "extendedKeyUsage=clientAuth\n";
    std::string d = dir_->string();
    std::string key = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    std::string ca_ext = " -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign";
    std::string script = "set -e; cd " + d + ";" + "openssl req -x509" + key + ca_ext +
                         " -keyout ca.key -out ca.pem -days 1 -subj /CN=TandemTestCA;" + "openssl req -x509" + key +
                         ca_ext + " -keyout other_ca.key -out other_ca.pem -days 1 -subj /CN=OtherCA;" + "openssl req" +
                         key + " -keyout server.key -out server.csr -subj /CN=localhost;" +
                         "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem "
                         "-days 1 -extfile server.ext;" +
                         "openssl req" + key + " -keyout client.key -out client.csr -subj /CN=router;" +
                         "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem "
                         "-days 1 -extfile client.ext;";
    std::string command = "sh -c '" + script + "' > " + d + "/openssl.log 2>&1";
    certs_ok_ = std::system(command.c_str()) == 0;
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(*dir_, ec);
    delete dir_;
  }
  void SetUp() override { ASSERT_TRUE(certs_ok_) << "openssl CLI failed; see " << *dir_; }
  void TearDown() override {
    if (server_) server_->Stop();
  }

  static std::string File(const char* name) { return (*dir_ / name).string(); }

  RpcServerConfig TlsServer(bool mutual) {
    RpcServerConfig config = ServerConfig();
    config.rpc.tls.enabled = true;
    config.rpc.tls.cert_file = File("server.pem");
    config.rpc.tls.key_file = File("server.key");
    if (mutual) config.rpc.tls.ca_file = File("ca.pem");
    return config;
  }
  RpcClientConfig TlsClient(const char* ca, bool with_cert) {
    RpcClientConfig config = ClientConfig();
    config.rpc.tls.enabled = true;
    config.rpc.tls.ca_file = File(ca);
    if (with_cert) {
      config.rpc.tls.cert_file = File("client.pem");
      config.rpc.tls.key_file = File("client.key");
    }
    return config;
  }
  void StartServer(RpcServerConfig config) {
    RpcHandlers handlers;
    handlers.on_request = [this](const std::shared_ptr<RpcConnection>& conn, MessagePtr message, Responder responder) {
      ++requests_served_;
      EchoReserve(conn, std::move(message), std::move(responder));
    };
    auto server = RpcServer::Start(loop_, std::move(config), handlers);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
  }
  Status RoundTrip(RpcClientConfig config) {
    TANDEM_ASSIGN_OR_RETURN(auto client, RpcClient::Create(loop_, std::move(config), {}));
    TANDEM_ASSIGN_OR_RETURN(auto conn, client->Connect(server_->address()));
    TANDEM_ASSIGN_OR_RETURN(auto reply, conn->CallAndWaitFor<proto::ReserveReply>(MakeReserve(9, 4), 3000));
    if (reply.request_id() != 9 || reply.prefix_hit_tokens() != 8) return InternalError("wrong reply");
    return Status::Ok();
  }

  static inline fs::path* dir_ = nullptr;
  static inline bool certs_ok_ = false;
  std::atomic<int> requests_served_{0};
  EventLoop loop_{2};
  std::unique_ptr<RpcServer> server_;
};

TEST_F(TlsTest, RoundTripOverTls) {
  StartServer(TlsServer(/*mutual=*/false));
  Status status = RoundTrip(TlsClient("ca.pem", /*with_cert=*/false));
  EXPECT_TRUE(status.ok()) << status.ToString();
}

TEST_F(TlsTest, ClientRefusesAServerSignedByAnotherCa) {
  StartServer(TlsServer(/*mutual=*/false));
  EXPECT_EQ(RoundTrip(TlsClient("other_ca.pem", false)).code(), StatusCode::kUnavailable);
}

TEST_F(TlsTest, ClientRefusesAServerWhoseNameDoesNotMatch) {
  StartServer(TlsServer(/*mutual=*/false));
  RpcClientConfig config = TlsClient("ca.pem", false);
  config.rpc.tls.server_name = "decode-7.example";
  EXPECT_EQ(RoundTrip(config).code(), StatusCode::kUnavailable);
}

TEST_F(TlsTest, MutualTlsAcceptsACertifiedClientAndRefusesOneWithoutCert) {
  StartServer(TlsServer(/*mutual=*/true));
  Status with_cert = RoundTrip(TlsClient("ca.pem", /*with_cert=*/true));
  EXPECT_TRUE(with_cert.ok()) << with_cert.ToString();
  Status without = RoundTrip(TlsClient("ca.pem", /*with_cert=*/false));
  EXPECT_EQ(without.code(), StatusCode::kUnavailable) << without.ToString();
  EXPECT_EQ(requests_served_.load(), 1) << "the client without a certificate got served";
}

TEST_F(TlsTest, PlaintextClientGetsNothingFromATlsServer) {
  StartServer(TlsServer(/*mutual=*/false));
  EXPECT_FALSE(RoundTrip(ClientConfig()).ok());
}

TEST_F(TlsTest, MissingCertificateFileIsAConfigError) {
  RpcServerConfig config = TlsServer(false);
  config.rpc.tls.cert_file = File("nope.pem");
  EXPECT_EQ(RpcServer::Start(loop_, config, {}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::net
