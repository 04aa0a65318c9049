// Integration tests on the shared control plane: each test in a namespace of its own, named
// after the test and this process, so that tests never see each other's objects.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <functional>
#include <string>

#include "kube/client.h"

namespace cifar::testing {

inline std::string create_test_namespace(kube::Client& client, const std::string& prefix) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  auto name = prefix + "-" + std::to_string(std::hash<std::string>{}(info->name()) % 1000000) +
              "-" + std::to_string(::getpid());
  client.create({"", "v1", "namespaces", "", "", ""},
                {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}});
  return name;
}

}  // namespace cifar::testing
