#include "distributed/ps/token_auth.h"

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpcpp/security/auth_metadata_processor.h>

namespace cifar::ps {
namespace {

std::string_view view(const grpc_slice& slice) {
  return {reinterpret_cast<const char*>(GRPC_SLICE_START_PTR(slice)), GRPC_SLICE_LENGTH(slice)};
}

// gRPC's processor interface: `state` is the expected header value, owned by the credentials
// (released by `destroy`). Runs on a transport thread, so it only compares and answers.
void check_token(void* state, grpc_auth_context* /*context*/, const grpc_metadata* metadata,
                 size_t count, grpc_process_auth_metadata_done_cb done, void* user_data) {
  const auto& expected = *static_cast<const std::string*>(state);
  bool admitted = false;
  for (size_t i = 0; i < count; ++i) {
    if (view(metadata[i].key) == "authorization") {
      admitted = equal_in_constant_time(view(metadata[i].value), expected);
      break;
    }
  }
  done(user_data, nullptr, 0, nullptr, 0, admitted ? GRPC_STATUS_OK : GRPC_STATUS_UNAUTHENTICATED,
       admitted ? nullptr : kTokenRefusal.data());  // a literal: NUL-terminated
}

void destroy_token(void* state) {
  std::unique_ptr<std::string>(static_cast<std::string*>(state));  // freed here
}

class TokenCheckingCredentials final : public grpc::ServerCredentials {
 public:
  explicit TokenCheckingCredentials(std::string token)
      : expected_header_("Bearer " + std::move(token)) {}

  void SetAuthMetadataProcessor(
      const std::shared_ptr<grpc::AuthMetadataProcessor>& /*processor*/) override {}

 private:
  // What grpc::Server calls for each listening port (private in ServerCredentials, overridable).
  int AddPortToServer(const std::string& address, grpc_server* server) override {
    grpc_server_credentials* credentials = grpc_insecure_server_credentials_create();
    auto state = std::make_unique<std::string>(expected_header_);
    grpc_server_credentials_set_auth_metadata_processor(
        credentials, {check_token, destroy_token, state.release()});
    const int port = grpc_server_add_http2_port(server, address.c_str(), credentials);
    grpc_server_credentials_release(credentials);
    return port;
  }

  std::string expected_header_;
};

}  // namespace

bool equal_in_constant_time(std::string_view given, std::string_view expected) {
  unsigned char difference = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    const char g = i < given.size() ? given[i] : '\0';
    difference = static_cast<unsigned char>(difference | (g ^ expected[i]));
  }
  return difference == 0;
}

std::shared_ptr<grpc::ServerCredentials> token_checking_credentials(std::string token) {
  if (token.empty()) return grpc::InsecureServerCredentials();
  return std::make_shared<TokenCheckingCredentials>(std::move(token));
}

}  // namespace cifar::ps
