// Integration tests on the shared control plane: each test in a namespace of its own, named
// after the test and this process, so that tests never see each other's objects.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <functional>
#include <string>

#include "kube/client.h"

namespace cifar::testing {

// `labels`: the namespace's, such as Pod Security Admission's level (kRestricted). The test's full
// name is its annotation cifartrain.io/test: whose a namespace left behind is, and whose pods'
// CPU it is (tests/cpu_profile.py).
inline std::string create_test_namespace(kube::Client& client, const std::string& prefix,
                                         const nlohmann::json& labels = nlohmann::json::object()) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  auto name = prefix + "-" + std::to_string(std::hash<std::string>{}(info->name()) % 1000000) +
              "-" + std::to_string(::getpid());
  client.create(
      {"", "v1", "namespaces", "", "", ""},
      {{"apiVersion", "v1"},
       {"kind", "Namespace"},
       {"metadata",
        {{"name", name},
         {"labels", labels},
         {"annotations",
          {{"cifartrain.io/test", std::string(info->test_suite_name()) + "." + info->name()}}}}}});
  return name;
}

// Pod Security Admission (on in every kube-apiserver since 1.25) enforcing the `restricted`
// level in a namespace: the API server refuses any pod that breaks it.
inline const nlohmann::json kRestricted = {{"pod-security.kubernetes.io/enforce", "restricted"}};

}  // namespace cifar::testing
