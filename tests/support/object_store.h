// The real S3-compatible object store the tests share: SeaweedFS, started once by the ctest
// fixture ObjectStore.Start (deploy/object-store/start.sh, its run directory given to the tests
// as CIFAR_OBJECT_STORE_RUN) with the bucket kBucket made and warmed. Tests keep apart by prefix.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace cifar::testing {

struct ObjectStore {
  static constexpr const char* kBucket = "cifar-tests";

  std::string endpoint;  // http://127.0.0.1:PORT
  int port = 0;
  std::string https_endpoint;  // https://127.0.0.1:PORT2, the same store over TLS
  std::string ca_bundle;       // the PEM of the CA that signed its certificate
  std::string access_key_id;
  std::string secret_access_key;

  // Throws if the fixture's run directory is not there (the test was run without the fixture).
  static ObjectStore from_fixture();
  // The store that deploy/object-store/start.sh started in `run` (its endpoints, CA and keys).
  static ObjectStore from_run_directory(const std::filesystem::path& run);
  // The environment an S3 tool (cifar-train) needs for it: AWS_ENDPOINT_URL and the keys.
  [[nodiscard]] std::vector<std::string> environment() const;
  // Sets that environment in this process (a test that opens the store itself, or whose children
  // inherit it).
  void export_environment() const;
};

// How a store is away: refusing connections (stopped: a restart, a failover) or frozen (SIGSTOP:
// the kernel still accepts connections, and nothing answers).
enum class StoreOutage { kRefusing, kFrozen };

// An object store of one test's own (deploy/object-store/start.sh in a directory of its own, with
// the bucket ObjectStore::kBucket), which the test takes away and brings back as real outages
// do: stopped and started again on its port and with its keys and data (a restart or failover:
// connections refused meanwhile), or frozen (SIGSTOP: the kernel still accepts connections, and
// nothing answers). Stopped when destroyed.
class OwnObjectStore {
 public:
  explicit OwnObjectStore(std::filesystem::path run);
  ~OwnObjectStore();
  OwnObjectStore(const OwnObjectStore&) = delete;
  OwnObjectStore& operator=(const OwnObjectStore&) = delete;

  [[nodiscard]] const ObjectStore& access() const { return access_; }
  void stop();
  void start();  // again, where it was
  void freeze();
  void thaw();
  // The outage begins (stop or freeze), and ends (start or thaw).
  void begin(StoreOutage outage);
  void end(StoreOutage outage);

 private:
  [[nodiscard]] int pid() const;

  std::filesystem::path run_;
  ObjectStore access_;
};

// A prefix in kBucket that no other test (or run of this one) uses: <name>-<random>.
std::string unique_prefix(std::string_view name);

}  // namespace cifar::testing
