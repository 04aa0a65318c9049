// The fixture of the cases with checkpoints in object storage on the cluster: a real
// S3-compatible server (SeaweedFS, deploy/object-store) of the case's own on node 1's bridge, over
// https with a private CA, its keys in a Secret and its CA in a ConfigMap of the case's namespace.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "storage/s3_client.h"
#include "storage/store.h"
#include "tests/e2e/cluster_fixture.h"
#include "tests/support/object_store.h"

namespace cifar::e2e {

class ObjectStorage : public Cluster {
 protected:
  void SetUp() override {
    Cluster::SetUp();
    store_dir_ = volumes_ / "object-store";
    const auto started = run_process(
        {(std::filesystem::path(CIFAR_SOURCE_DIR) / "deploy/object-store/start.sh").string(),
         store_dir_.string(), "--address", kNodeOneBridge, "--bucket", "checkpoints", "--tls",
         "--dns-name", store_dns_name()});
    ASSERT_EQ(started.exit_code, 0) << started.output;
    const auto store = cifar::testing::ObjectStore::from_run_directory(store_dir_);
    endpoint_ = store.https_endpoint;
    key_id_ = store.access_key_id;
    secret_ = store.secret_access_key;
    ca_bundle_ = store.ca_bundle;
    keys_secret(ns_, "store-keys", secret_);
    ca_config_map(ns_);
    checkpoint_store_ = store_fields("s3://checkpoints/e2e", "store-keys");
  }
  void TearDown() override {
    Cluster::TearDown();
    run_process({(std::filesystem::path(CIFAR_SOURCE_DIR) / "deploy/object-store/stop.sh").string(),
                 store_dir_.string()});
  }

  // spec.checkpoint's fields for the store.
  [[nodiscard]] std::string store_fields(const std::string& uri, const std::string& secret) const {
    return "uri: " + uri + ", s3: {endpoint: '" + endpoint_ +
           "', addressing: Path, credentialsSecret: " + secret + ", caBundleConfigMap: store-ca}";
  }
  // The ConfigMap store-ca with the store's CA as ca.crt, which the jobs' store users trust.
  void ca_config_map(const std::string& ns) {
    const auto made =
        kubectl({"create", "configmap", "store-ca", "-n", ns, "--from-file=ca.crt=" + ca_bundle_});
    ASSERT_EQ(made.exit_code, 0) << made.output;
  }
  // A Secret with the store's key id and `secret` as the secret key.
  void keys_secret(const std::string& ns, const std::string& name, const std::string& secret) {
    const auto made = kubectl({"create", "secret", "generic", name, "-n", ns,
                               "--from-literal=AWS_ACCESS_KEY_ID=" + key_id_,
                               "--from-literal=AWS_SECRET_ACCESS_KEY=" + secret});
    ASSERT_EQ(made.exit_code, 0) << made.output;
  }
  // Pod `pod` of `job` deleted mid-run (after the job's first checkpoint).
  void delete_mid_run(const std::string& job, const std::string& pod) {
    ASSERT_TRUE(wait_for(
        [&] {
          return status_of(job).value("progress", json::object()).value("step", 0) >
                 checkpoint_every_steps_;
        },
        seconds(180)))
        << diagnose(job);
    ASSERT_NE(state(job), "Succeeded") << "the job ended before it could be interrupted";
    const auto deleted = kubectl({"delete", "pod", pod, "-n", ns_, "--wait=false"});
    ASSERT_EQ(deleted.exit_code, 0) << deleted.output;
  }
  // The replacement of `pod` restored what it holds from the bucket: its log says `said` and the
  // run's checkpoint there. Read before the job ends (its pods are deleted then).
  void expect_restored(const std::string& job, const std::string& pod, const std::string& said) {
    const auto wanted = said + " s3://checkpoints/e2e/" + ns_ + "/" + job + "-";
    std::string log;
    EXPECT_TRUE(wait_for(
                    [&] {
                      log = kubectl({"logs", pod, "-n", ns_}).output;
                      return log.find(wanted) != std::string::npos || state(job) == "Failed";
                    },
                    seconds(180)) &&
                log.find(wanted) != std::string::npos)
        << wanted << " not in:\n"
        << log << diagnose(job);
    EXPECT_NE(log.find("/simplecnn-step-"), std::string::npos) << log;
  }

  // A name of the store's in the job's namespace, on its certificate: a Service of that name
  // without pods resolves to the store's address once store_service() made it.
  [[nodiscard]] std::string store_dns_name() const {
    return std::string(kStoreService) + "." + ns_ + ".svc.cluster.local";
  }
  void store_service() {
    const auto port = endpoint_.substr(endpoint_.rfind(':') + 1);
    const std::string name = kStoreService;
    apply("apiVersion: v1\nkind: Service\nmetadata: {name: " + name +
          "}\nspec: {clusterIP: None, ports: [{port: " + port +
          ", protocol: TCP}]}\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
          "metadata: {name: " +
          name + "-1, labels: {kubernetes.io/service-name: " + name +
          "}}\naddressType: IPv4\nendpoints: [{addresses: ['" + kNodeOneBridge +
          "']}]\nports: [{port: " + port + ", protocol: TCP}]\n");
  }

  // A job's run in the store (`status.modelDir`), opened from this process with the store's keys
  // and CA, as a user's tool would.
  [[nodiscard]] std::unique_ptr<storage::Store> open_run(const json& status) const {
    auto store = cifar::testing::ObjectStore::from_run_directory(store_dir_);
    store.endpoint = store.https_endpoint;
    store.export_environment();
    ::setenv("AWS_CA_BUNDLE", store.ca_bundle.c_str(), 1);
    return storage::open_store(status.value("modelDir", ""));
  }
  // A job that succeeded left its last checkpoint in the bucket: the done marker names its step,
  // the bucket has it, and the job's status says it was saved, with no store outage.
  void expect_last_checkpoint_in_bucket(const json& status) const {
    const auto bucket = open_run(status);
    const auto done = bucket->get("simplecnn.done");
    ASSERT_TRUE(done) << status.value("modelDir", "");
    const auto final_step = json::parse(*done).at("step").get<int64_t>();
    const auto checkpoint = status["progress"].value("checkpoint", json::object());
    EXPECT_EQ(checkpoint.value("savedStep", 0), final_step) << checkpoint.dump();
    EXPECT_FALSE(checkpoint.contains("storeUnreachableSince")) << checkpoint.dump();
    EXPECT_EQ(status["progress"].value("step", 0), final_step) << status.dump();
    char name[64];
    std::snprintf(name, sizeof(name), "simplecnn-step-%010lld.pt",
                  static_cast<long long>(final_step));
    EXPECT_TRUE(bucket->get(name)) << status.value("modelDir", "") << "/" << name;
  }

  // The CIFAR-10 slice's files put in the bucket under `prefix` (as the archive unpacks them), as
  // a user's S3 tool would; `cut` bytes cut off the end of `short_file` ("": none).
  void put_slice(const std::string& prefix, const std::string& short_file = "",
                 size_t cut = 0) const {
    const auto access = cifar::testing::ObjectStore::from_run_directory(store_dir_);
    storage::S3ClientOptions options;
    options.endpoint = access.https_endpoint;
    options.ca_bundle = access.ca_bundle;
    options.credentials = {access.access_key_id, access.secret_access_key};
    storage::S3Client client(options);
    const auto slice = e2e_dir() / "cifar10-slice" / "cifar-10-batches-bin";
    for (const auto& file : std::filesystem::directory_iterator(slice)) {
      auto bytes = cifar::testing::read_file(file.path());
      const auto name = file.path().filename().string();
      if (name == short_file) bytes.resize(bytes.size() - cut);
      client.put("checkpoints", prefix + "/cifar-10-batches-bin/" + name, bytes);
    }
  }

  static constexpr const char* kNodeOneBridge = "10.244.0.1";
  static constexpr const char* kStoreService = "objects";
  std::filesystem::path store_dir_;
  std::string endpoint_;
  std::string key_id_;
  std::string secret_;
  std::string ca_bundle_;
};

}  // namespace cifar::e2e
