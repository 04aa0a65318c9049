// The job token's check at the PS's door: server credentials for a plain (insecure) listening port
// whose calls must carry "authorization: Bearer <token>". The check runs in gRPC's auth filter on
// the call's initial metadata, before the request message is read: a call without the token is
// refused (UNAUTHENTICATED) having cost the server its headers, not its payload, however large
// the payload it was about to send (the handlers' own check came after gRPC had received up to
// the message limit, 512 MB). The comparison takes the same time wherever the token differs.
//
// gRPC's C++ InsecureServerCredentials cannot take an auth metadata processor (it asserts), but
// the core's insecure credentials can: these credentials are those, with the processor set.
#pragma once

#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>
#include <string_view>

namespace cifar::ps {

// Plain insecure credentials for an empty token.
std::shared_ptr<grpc::ServerCredentials> token_checking_credentials(std::string token);

// Whether `given` equals `expected`, in a time that depends only on their lengths.
bool equal_in_constant_time(std::string_view given, std::string_view expected);

inline constexpr std::string_view kTokenRefusal =
    "missing or wrong job token (CIFAR_PS_TOKEN must match the PS's)";

}  // namespace cifar::ps
