#include "distributed/ps/token_auth.h"

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>

#include <array>
#include <chrono>
#include <map>
#include <mutex>

namespace cifar::ps {
namespace {

std::string_view view(const grpc_slice& slice) {
  return {reinterpret_cast<const char*>(GRPC_SLICE_START_PTR(slice)), GRPC_SLICE_LENGTH(slice)};
}

// What the checks need, owned by the core credentials (released by `destroy_door`).
struct Door {
  std::string expected_header;  // "" : no token asked for
  std::optional<std::string> ca_certificate_pem;
  std::function<void(Refusal)> on_refusal;
  std::mutex mutex;
  // Callers' PEMs the CA issued (a job has a few), until they expire.
  std::map<std::string, std::chrono::system_clock::time_point> admitted_certificates;

  // Why the caller of this call is refused, if it is; the certificate first.
  std::optional<Refusal> refusal(grpc_auth_context* context, const grpc_metadata* metadata,
                                 size_t count) {
    if (ca_certificate_pem) {
      auto properties =
          grpc_auth_context_find_properties_by_name(context, GRPC_X509_PEM_CERT_PROPERTY_NAME);
      const grpc_auth_property* pem = grpc_auth_property_iterator_next(&properties);
      if (pem == nullptr) return Refusal::kNoCertificate;
      if (const auto refused = certificate_refusal(std::string(pem->value, pem->value_length))) {
        return refused;
      }
    }
    if (expected_header.empty()) return std::nullopt;
    for (size_t i = 0; i < count; ++i) {
      if (view(metadata[i].key) == "authorization") {
        if (equal_in_constant_time(view(metadata[i].value), expected_header)) return std::nullopt;
        break;
      }
    }
    return Refusal::kToken;
  }

  // Why a caller presenting `certificate` is refused, if it is: not the CA's, or not a caller's.
  // An admitted certificate is remembered until it expires, so that a call costs no parsing.
  std::optional<Refusal> certificate_refusal(const std::string& certificate) {
    const auto now = std::chrono::system_clock::now();
    {
      std::lock_guard lock(mutex);
      const auto known = admitted_certificates.find(certificate);
      if (known != admitted_certificates.end() && now < known->second) return std::nullopt;
    }
    if (!security::issued_by(certificate, *ca_certificate_pem)) {  // checks the time
      return Refusal::kForeignCertificate;
    }
    if (!security::may_call(certificate)) return Refusal::kNotACaller;
    std::lock_guard lock(mutex);
    if (admitted_certificates.size() >= 16) admitted_certificates.clear();
    admitted_certificates[certificate] = security::expiry_of(certificate);
    return std::nullopt;
  }
};

// Each refusal's metric label and the message its caller gets, in Refusal's order.
struct RefusalWords {
  std::string_view label;
  std::string_view message;  // a literal: NUL-terminated, as gRPC's callback takes it
};
constexpr std::array<RefusalWords, 4> kRefusalWords{{
    {"no_certificate", kNoCertificateRefusal},
    {"foreign_certificate", kForeignCertificateRefusal},
    {"not_a_caller", kNotACallerRefusal},
    {"token", kTokenRefusal},
}};
const RefusalWords& words_of(Refusal refusal) {
  return kRefusalWords.at(static_cast<size_t>(refusal));
}

// gRPC's processor interface. Runs on a transport thread, so it only checks and answers.
void check_call(void* state, grpc_auth_context* context, const grpc_metadata* metadata,
                size_t count, grpc_process_auth_metadata_done_cb done, void* user_data) {
  auto& door = *static_cast<Door*>(state);
  const auto refusal = door.refusal(context, metadata, count);
  if (refusal && door.on_refusal) door.on_refusal(*refusal);
  done(user_data, nullptr, 0, nullptr, 0, refusal ? GRPC_STATUS_UNAUTHENTICATED : GRPC_STATUS_OK,
       refusal ? words_of(*refusal).message.data() : nullptr);
}

void destroy_door(void* state) {
  std::unique_ptr<Door>(static_cast<Door*>(state));  // freed here
}

class DoorCredentials final : public grpc::ServerCredentials {
 public:
  explicit DoorCredentials(DoorOptions options) : options_(std::move(options)) {}

  void SetAuthMetadataProcessor(
      const std::shared_ptr<grpc::AuthMetadataProcessor>& /*processor*/) override {}

 private:
  // What grpc::Server calls for each listening port (private in ServerCredentials, overridable).
  int AddPortToServer(const std::string& address, grpc_server* server) override {
    grpc_server_credentials* credentials = nullptr;
    if (options_.tls) {
      // The chain is checked against the job's CA by the door (check_call), so that a stranger's
      // certificate is refused as a call, counted, rather than as a handshake nobody sees.
      grpc_ssl_pem_key_cert_pair pair{options_.tls->private_key.c_str(),
                                      options_.tls->certificate.c_str()};
      credentials = grpc_ssl_server_credentials_create_ex(
          options_.tls->ca_certificate.c_str(), &pair, 1,
          GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_BUT_DONT_VERIFY, nullptr);
    } else {
      credentials = grpc_insecure_server_credentials_create();
    }
    auto door = std::make_unique<Door>();
    if (!options_.token.empty()) door->expected_header = "Bearer " + options_.token;
    if (options_.tls) door->ca_certificate_pem = options_.tls->ca_certificate;
    door->on_refusal = options_.on_refusal;
    grpc_server_credentials_set_auth_metadata_processor(credentials,
                                                        {check_call, destroy_door, door.release()});
    const int port = grpc_server_add_http2_port(server, address.c_str(), credentials);
    grpc_server_credentials_release(credentials);
    return port;
  }

  DoorOptions options_;
};

}  // namespace

std::string_view refusal_name(Refusal refusal) { return words_of(refusal).label; }

bool equal_in_constant_time(std::string_view given, std::string_view expected) {
  unsigned char difference = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    const char g = i < given.size() ? given[i] : '\0';
    difference = static_cast<unsigned char>(difference | (g ^ expected[i]));
  }
  return difference == 0;
}

std::shared_ptr<grpc::ServerCredentials> door_credentials(DoorOptions options) {
  if (options.token.empty() && !options.tls) return grpc::InsecureServerCredentials();
  return std::make_shared<DoorCredentials>(std::move(options));
}

}  // namespace cifar::ps
