#include "tests/support/object_store.h"

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>

#include "tests/support/process.h"

namespace cifar::testing {

ObjectStore ObjectStore::from_fixture() {
  const char* run = std::getenv("CIFAR_OBJECT_STORE_RUN");
  if (run == nullptr || !std::filesystem::exists(std::filesystem::path(run) / "endpoint")) {
    throw std::runtime_error(
        "no object store: run this test through ctest (fixture ObjectStore.Start), or start "
        "one with deploy/object-store/start.sh DIR --bucket cifar-tests and set "
        "CIFAR_OBJECT_STORE_RUN=DIR");
  }
  return from_run_directory(run);
}

ObjectStore ObjectStore::from_run_directory(const std::filesystem::path& run) {
  ObjectStore store;
  std::ifstream(run / "endpoint") >> store.endpoint;
  store.port = std::stoi(store.endpoint.substr(store.endpoint.rfind(':') + 1));
  std::ifstream(run / "endpoint-https") >> store.https_endpoint;
  store.ca_bundle = (run / "ca.pem").string();
  std::ifstream credentials(run / "credentials.env");
  for (std::string line; std::getline(credentials, line);) {
    const auto value = line.substr(line.find('=') + 1);
    if (line.rfind("AWS_ACCESS_KEY_ID=", 0) == 0) store.access_key_id = value;
    if (line.rfind("AWS_SECRET_ACCESS_KEY=", 0) == 0) store.secret_access_key = value;
  }
  return store;
}

std::vector<std::string> ObjectStore::environment() const {
  return {"AWS_ENDPOINT_URL=" + endpoint, "AWS_ACCESS_KEY_ID=" + access_key_id,
          "AWS_SECRET_ACCESS_KEY=" + secret_access_key};
}

void ObjectStore::export_environment() const {
  for (const auto& variable : environment()) {
    const auto at = variable.find('=');
    ::setenv(variable.substr(0, at).c_str(), variable.substr(at + 1).c_str(), 1);
  }
}

namespace {

void run_script(const std::string& script, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {std::string(CIFAR_SOURCE_DIR) + "/deploy/object-store/" +
                                   script};
  argv.insert(argv.end(), args.begin(), args.end());
  const auto result = run_process(argv);
  if (result.exit_code != 0) {
    throw std::runtime_error(script + " failed (" + std::to_string(result.exit_code) +
                             "): " + result.output);
  }
}

}  // namespace

OwnObjectStore::OwnObjectStore(std::filesystem::path run) : run_(std::move(run)) {
  run_script("start.sh", {run_.string(), "--bucket", ObjectStore::kBucket, "--fresh"});
  access_ = ObjectStore::from_run_directory(run_);
}

OwnObjectStore::~OwnObjectStore() {
  thaw();  // a frozen process does not stop on SIGTERM
  run_process({std::string(CIFAR_SOURCE_DIR) + "/deploy/object-store/stop.sh", run_.string()});
}

int OwnObjectStore::pid() const {
  int pid = 0;
  std::ifstream(run_ / "pid") >> pid;
  return pid;
}

void OwnObjectStore::stop() { run_script("stop.sh", {run_.string()}); }

void OwnObjectStore::start() {
  run_script("start.sh", {run_.string(), "--port", std::to_string(access_.port)});
}

void OwnObjectStore::freeze() {
  if (const int p = pid(); p > 0) ::kill(p, SIGSTOP);
}

void OwnObjectStore::thaw() {
  if (const int p = pid(); p > 0) ::kill(p, SIGCONT);
}

void OwnObjectStore::begin(StoreOutage outage) {
  outage == StoreOutage::kRefusing ? stop() : freeze();
}

void OwnObjectStore::end(StoreOutage outage) {
  outage == StoreOutage::kRefusing ? start() : thaw();
}

std::string unique_prefix(std::string_view name) {
  std::random_device random;
  return std::string(name) + "-" + std::to_string(random() % 1000000000);
}

}  // namespace cifar::testing
