// The Kubernetes client against a real kube-apiserver: kubeconfig with client certificates,
// bearer tokens, CRUD with server errors as typed ApiErrors, the status subresource written as a
// kubelet would, and watch streams.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "kube/client.h"
#include "tests/integration/test_namespace.h"
#include "tests/support/process.h"

namespace cifar::kube {
namespace {

using nlohmann::json;

std::string kubeconfig_path() {
  const char* path = std::getenv("CIFAR_KUBECONFIG");
  if (path == nullptr) throw std::runtime_error("CIFAR_KUBECONFIG is not set (ctest sets it)");
  return path;
}

json pod_manifest(const std::string& name, const std::string& app) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"labels", {{"app", app}}}}},
          {"spec", {{"containers", json::array({{{"name", "c"}, {"image", "busybox"}}})}}}};
}

// Each test in a namespace of its own.
class KubeClient : public ::testing::Test {
 protected:
  void SetUp() override { ns_ = cifar::testing::create_test_namespace(client_, "kc"); }

  Client client_{load_kubeconfig(kubeconfig_path())};
  std::string ns_;
};

TEST(Kubeconfig, ReadsServerCertificatesAndNamespace) {
  const auto access = load_kubeconfig(kubeconfig_path());
  EXPECT_EQ(access.server.rfind("https://127.0.0.1:", 0), 0U) << access.server;
  EXPECT_NE(access.ca_pem.find("BEGIN CERTIFICATE"), std::string::npos);
  EXPECT_NE(access.client_cert_pem.find("BEGIN CERTIFICATE"), std::string::npos);
  EXPECT_NE(access.client_key_pem.find("PRIVATE KEY"), std::string::npos);
  EXPECT_EQ(access.namespace_, "default");
}

TEST(Kubeconfig, BadFilesAndContextsAreNamedInTheError) {
  cifar::testing::TempDir dir;
  const auto missing = dir.path() / "missing";
  try {
    (void)load_kubeconfig(missing);
    ADD_FAILURE();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(missing.string()), std::string::npos) << e.what();
  }
  try {
    (void)load_kubeconfig(kubeconfig_path(), "nope");
    ADD_FAILURE();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no contexts entry named 'nope'"), std::string::npos)
        << e.what();
  }
}

TEST_F(KubeClient, CreateGetListPatchApplyStatusAndDelete) {
  const auto created = client_.create(pods(ns_), pod_manifest("p1", "a"));
  EXPECT_EQ(created["metadata"]["name"], "p1");
  client_.create(pods(ns_), pod_manifest("p2", "b"));

  EXPECT_EQ(client_.get(pods(ns_).named("p1"))["spec"]["containers"][0]["image"], "busybox");
  const auto listed = client_.list(pods(ns_), {"app=b", "", ""});
  ASSERT_EQ(listed["items"].size(), 1U);
  EXPECT_EQ(listed["items"][0]["metadata"]["name"], "p2");

  const auto merged = client_.patch(
      pods(ns_).named("p1"), {{"metadata", {{"labels", {{"step", "merge"}}}}}}, PatchType::kMerge);
  EXPECT_EQ(merged["metadata"]["labels"]["step"], "merge");
  EXPECT_EQ(merged["metadata"]["labels"]["app"], "a");
  const auto applied =
      client_.patch(pods(ns_).named("p1"),
                    {{"apiVersion", "v1"},
                     {"kind", "Pod"},
                     {"metadata", {{"name", "p1"}, {"annotations", {{"by", "apply"}}}}}},
                    PatchType::kApply);
  EXPECT_EQ(applied["metadata"]["annotations"]["by"], "apply");
  bool managed = false;
  for (const auto& m : applied["metadata"]["managedFields"]) {
    managed = managed || (m["manager"] == "cifar-operator" && m["operation"] == "Apply");
  }
  EXPECT_TRUE(managed) << applied["metadata"]["managedFields"].dump();

  // What a kubelet reports: phase and the container's exit code, through the status subresource.
  const json status = {
      {"status",
       {{"phase", "Failed"},
        {"containerStatuses",
         json::array({{{"name", "c"},
                       {"image", "busybox"},
                       {"imageID", ""},
                       {"ready", false},
                       {"restartCount", 0},
                       {"state", {{"terminated", {{"exitCode", 137}, {"reason", "Error"}}}}}}})}}}};
  client_.patch(pods(ns_).named("p1").sub("status"), status, PatchType::kMerge);
  const auto reported = client_.get(pods(ns_).named("p1"));
  EXPECT_EQ(reported["status"]["phase"], "Failed");
  EXPECT_EQ(reported["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"], 137);

  client_.remove(pods(ns_).named("p1"));
  try {
    (void)client_.get(pods(ns_).named("p1"));
    // Deletion of a pod without a kubelet is immediate only with no finalizers; either way it
    // must be gone or going.
    ADD_FAILURE() << "p1 still readable after delete";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 404);
    EXPECT_EQ(e.reason(), "NotFound");
  }
}

TEST_F(KubeClient, ServerErrorsAreTypedWithReasonAndMessage) {
  client_.create(pods(ns_), pod_manifest("twice", "a"));
  try {
    client_.create(pods(ns_), pod_manifest("twice", "a"));
    ADD_FAILURE();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 409);
    EXPECT_EQ(e.reason(), "AlreadyExists");
    EXPECT_NE(std::string(e.what()).find("POST /api/v1/namespaces/" + ns_ + "/pods"),
              std::string::npos)
        << e.what();
  }
  auto bad = pod_manifest("Bad_Name", "a");
  try {
    client_.create(pods(ns_), bad);
    ADD_FAILURE();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 422);
    EXPECT_EQ(e.reason(), "Invalid");
  }
}

TEST_F(KubeClient, BearerTokensAuthenticateAndRbacDecides) {
  client_.create(
      {"", "v1", "serviceaccounts", ns_, "", ""},
      {{"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", {{"name", "op"}}}});
  const auto token = client_.create({"", "v1", "serviceaccounts", ns_, "op", "token"},
                                    {{"apiVersion", "authentication.k8s.io/v1"},
                                     {"kind", "TokenRequest"},
                                     {"spec", json::object()}});
  auto access = client_.access();
  access.client_cert_pem.clear();
  access.client_key_pem.clear();
  access.bearer_token = token["status"]["token"];
  Client as_op(access);
  try {
    (void)as_op.list(pods(ns_));
    ADD_FAILURE() << "a service account without a role listed pods";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 403);
    EXPECT_EQ(e.reason(), "Forbidden");
  }
  client_.create({"rbac.authorization.k8s.io", "v1", "roles", ns_, "", ""},
                 {{"apiVersion", "rbac.authorization.k8s.io/v1"},
                  {"kind", "Role"},
                  {"metadata", {{"name", "pods"}}},
                  {"rules", json::array({{{"apiGroups", json::array({""})},
                                          {"resources", json::array({"pods"})},
                                          {"verbs", json::array({"list"})}}})}});
  client_.create(
      {"rbac.authorization.k8s.io", "v1", "rolebindings", ns_, "", ""},
      {{"apiVersion", "rbac.authorization.k8s.io/v1"},
       {"kind", "RoleBinding"},
       {"metadata", {{"name", "op-pods"}}},
       {"roleRef", {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "Role"}, {"name", "pods"}}},
       {"subjects",
        json::array({{{"kind", "ServiceAccount"}, {"name", "op"}, {"namespace", ns_}}})}});
  // RBAC is eventually consistent within the apiserver: allow it a moment.
  EXPECT_TRUE(cifar::testing::wait_for(
      [&] {
        try {
          return as_op.list(pods(ns_))["items"].is_array();
        } catch (const ApiError&) {
          return false;
        }
      },
      std::chrono::seconds(10)));
}

TEST_F(KubeClient, WatchStreamsChangesAfterTheListedVersion) {
  const auto version = client_.list(pods(ns_))["metadata"]["resourceVersion"].get<std::string>();
  std::vector<std::string> seen;
  std::atomic<bool> stop{false};
  std::thread watcher([&] {
    client_.watch(
        pods(ns_), {"", "", version},
        [&](const WatchEvent& e) {
          if (e.type == "BOOKMARK") return true;
          seen.push_back(e.type + " " + e.object["metadata"]["name"].get<std::string>());
          return e.type != "DELETED";
        },
        stop, std::chrono::seconds(30));
  });
  client_.create(pods(ns_), pod_manifest("w", "a"));
  client_.patch(pods(ns_).named("w"), {{"metadata", {{"labels", {{"x", "1"}}}}}},
                PatchType::kMerge);
  client_.remove(pods(ns_).named("w"));
  watcher.join();
  ASSERT_GE(seen.size(), 3U);
  EXPECT_EQ(seen.front(), "ADDED w");
  EXPECT_EQ(seen[1], "MODIFIED w");
  EXPECT_EQ(seen.back(), "DELETED w");
}

// What an informer's relist does with a fleet's pods: pages of `limit`, each naming the next.
TEST_F(KubeClient, AListInPagesHasEveryItemOnce) {
  for (int i = 0; i < 5; ++i) client_.create(pods(ns_), pod_manifest("p" + std::to_string(i), "a"));
  ListPage next{2, ""};
  std::vector<std::string> names;
  int pages = 0;
  do {
    const auto page = client_.list(pods(ns_), {}, next);
    ++pages;
    EXPECT_LE(page["items"].size(), 2U);
    for (const auto& item : page["items"]) names.push_back(item["metadata"]["name"]);
    next.continue_token = page["metadata"].value("continue", "");
  } while (!next.continue_token.empty() && pages < 10);
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(names, (std::vector<std::string>{"p0", "p1", "p2", "p3", "p4"}));
}

TEST_F(KubeClient, AStoppedWatchReturnsPromptly) {
  std::atomic<bool> stop{false};
  const auto start = std::chrono::steady_clock::now();
  std::thread watcher([&] {
    client_.watch(
        pods(ns_), {}, [](const WatchEvent&) { return true; }, stop, std::chrono::seconds(60));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  stop = true;
  watcher.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(KubeClientUnreachable, NoServerIsStatusZeroNamingTheServer) {
  ClusterAccess access;
  access.server = "https://127.0.0.1:" + std::to_string(cifar::testing::free_port());
  Client client(access);
  try {
    (void)client.list(pods("default"));
    ADD_FAILURE();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 0);
    EXPECT_NE(std::string(e.what()).find(access.server), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cifar::kube
