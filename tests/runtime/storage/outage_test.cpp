// A run's store away for a while, for real: an object store of the test's own (SeaweedFS) stopped
// and started again (connections refused meanwhile) or frozen with SIGSTOP (accepted by the
// kernel, never answered). Requests through a RetryingStore wait it out up to its patience; past
// it they fail saying for how long and what the store last answered; what refuses fails at once.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <thread>

#include "storage/cancellation.h"
#include "storage/retrying_store.h"
#include "storage/s3_client.h"
#include "storage/s3_store.h"
#include "tests/support/object_store.h"
#include "tests/support/process.h"

namespace cifar::storage {
namespace {
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::ObjectStore;

// Names resolved as this process's own: its /etc/resolv.conf and /etc/hosts replaced in a mount
// namespace of its own (each case runs in a process of its own). The name server is a socket that
// takes queries and never answers (one try of 1 s a lookup), so a name resolves only once add()
// has put it in the hosts file: DNS that does not answer, until it does.
class SilentResolver {
 public:
  explicit SilentResolver(const std::filesystem::path& dir) : hosts_(dir / "hosts") {
    if (::unshare(CLONE_NEWNS) != 0 ||
        ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      throw std::system_error(errno, std::generic_category(), "a mount namespace of its own");
    }
    name_server_ = ::socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(53);
    ::inet_pton(AF_INET, kAddress, &address.sin_addr);
    if (name_server_ < 0 ||
        ::bind(name_server_, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
      throw std::system_error(errno, std::generic_category(), "a name server on 127.0.0.2:53");
    }
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "resolv.conf")
        << "nameserver " << kAddress << "\noptions timeout:1 attempts:1\n";
    std::filesystem::copy_file("/etc/hosts", hosts_);
    over("/etc/resolv.conf", dir / "resolv.conf");
    over("/etc/hosts", hosts_);
  }
  ~SilentResolver() { ::close(name_server_); }
  SilentResolver(const SilentResolver&) = delete;
  SilentResolver& operator=(const SilentResolver&) = delete;

  // From now on `name` resolves to `ip` (the same file under the mount: glibc reads it each time).
  void add(const std::string& name, const std::string& ip) const {
    std::ofstream(hosts_, std::ios::app) << ip << " " << name << "\n";
  }

 private:
  static constexpr char kAddress[] = "127.0.0.2";
  static void over(const char* target, const std::filesystem::path& source) {
    if (::mount(source.c_str(), target, nullptr, MS_BIND, nullptr) != 0) {
      throw std::system_error(errno, std::generic_category(), std::string("mount over ") + target);
    }
  }
  std::filesystem::path hosts_;
  int name_server_ = -1;
};

class StoreOutage : public ::testing::Test {
 protected:
  // The store's S3 client as a run opens it (one try a request: the RetryingStore retries), with a
  // stall noticed in `stall` (3 s rather than 20).
  [[nodiscard]] std::unique_ptr<Store> plain(const std::string& secret = "",
                                             std::chrono::seconds stall = 3s,
                                             const std::string& host = "") const {
    S3ClientOptions options;
    options.endpoint = store_.access().endpoint;
    if (!host.empty()) options.endpoint.replace(options.endpoint.find("127.0.0.1"), 9, host);
    options.credentials = {store_.access().access_key_id,
                           secret.empty() ? store_.access().secret_access_key : secret};
    options.attempts = 1;
    options.stall_timeout = stall;
    return std::make_unique<S3Store>(
        parse_s3_uri(std::string("s3://") + ObjectStore::kBucket + "/" + prefix_), options);
  }

  testing::TempDir run_;
  testing::OwnObjectStore store_{run_.path() / "store"};
  const std::string prefix_ = testing::unique_prefix("outage");
};

TEST_F(StoreOutage, ARequestWaitsOutARestartOfTheStoreAndGetsItsAnswer) {
  RetryingStore retrying(plain(), 120s, 200ms);
  retrying.put("kept.pt", "before the outage");
  store_.stop();
  std::thread restart([&] {
    std::this_thread::sleep_for(10s);
    store_.start();
  });
  const auto got = retrying.get("kept.pt");  // refused for 10 s, then answered
  restart.join();
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, "before the outage");
  const auto health = retrying.health();
  EXPECT_GT(health.transient_failures, 0);
  EXPECT_FALSE(health.unreachable_since);  // it answers again
  EXPECT_NE(health.last_error.find("no answer"), std::string::npos) << health.last_error;
}

TEST_F(StoreOutage, AFrozenStoreIsWaitedOutLikeOneThatRefuses) {
  RetryingStore retrying(plain(), 120s, 200ms);
  store_.freeze();
  const auto frozen = Clock::now();
  // Long enough for a stall to be noticed (curl's speed check takes a few seconds more than the
  // 3 s asked), so that the write is tried again at least once.
  std::thread thaw([&] {
    std::this_thread::sleep_for(25s);
    store_.thaw();
  });
  retrying.put("written.pt", "through a frozen store");
  EXPECT_GE(Clock::now() - frozen, 25s);  // it could only land once the store was back
  thaw.join();
  EXPECT_EQ(plain()->get("written.pt"), "through a frozen store");
  EXPECT_GT(retrying.health().transient_failures, 0);
}

TEST_F(StoreOutage, AnOutageLongerThanThePatienceFailsSayingForHowLongAndWhatItLastSaid) {
  RetryingStore retrying(plain(), 4s, 200ms);
  store_.stop();
  try {
    static_cast<void>(retrying.list("x"));
    FAIL() << "no error";
  } catch (const S3Error& e) {
    const std::string message = e.what();
    EXPECT_TRUE(e.transient());
    EXPECT_NE(message.find(std::string("s3://") + ObjectStore::kBucket + "/" + prefix_ +
                           " did not answer LIST x for 4 s"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("--max-unsaved-seconds 4"), std::string::npos) << message;
    EXPECT_NE(message.find("last error: "), std::string::npos) << message;
    EXPECT_NE(message.find(store_.access().endpoint), std::string::npos) << message;
  }
  EXPECT_TRUE(retrying.health().unreachable_since);
}

TEST_F(StoreOutage, WhatRefusesFailsAtOnceAndIsNeverWaitedFor) {
  RetryingStore wrong_keys(plain("not-the-secret"), 120s, 200ms);
  const auto start = Clock::now();
  try {
    wrong_keys.put("x.pt", "x");
    FAIL() << "no error";
  } catch (const S3Error& e) {
    EXPECT_FALSE(e.transient());
    EXPECT_EQ(e.code(), "SignatureDoesNotMatch");
  }
  // Not the 120 s it would wait for a store that is away: no try was made again.
  EXPECT_LT(Clock::now() - start, 60s);
  EXPECT_EQ(wrong_keys.health().transient_failures, 0);
}

// The store's name not resolving for 10 s (its resolver silent): waited out like a store that is
// away, and the request lands once the name resolves.
TEST_F(StoreOutage, ANameTheResolverDoesNotAnswerForIsWaitedOut) {
  const SilentResolver resolver(run_.path() / "resolver");
  RetryingStore retrying(plain("", 3s, "store.test"), 120s, 200ms);
  const auto start = Clock::now();
  std::thread answer([&] {
    std::this_thread::sleep_for(10s);
    resolver.add("store.test", "127.0.0.1");
  });
  retrying.put("through-dns.pt", "written once the name resolved");
  EXPECT_GE(Clock::now() - start, 10s);
  answer.join();
  const auto health = retrying.health();
  EXPECT_GT(health.transient_failures, 0);
  EXPECT_FALSE(health.unreachable_since);
  EXPECT_NE(health.last_error.find("Could not resolve host: store.test"), std::string::npos)
      << health.last_error;
  EXPECT_EQ(plain()->get("through-dns.pt"), "written once the name resolved");
}

// A request made under a Cancellation, on its own thread (as a background upload is) against a
// store that is away, and cancelled `after` it began: how long it went on after the cancel, and
// whether it ended in Cancelled.
struct CancelledRequest {
  std::chrono::duration<double> went_on_for{};
  bool ended_cancelled = false;
};

CancelledRequest put_cancelled(Store& store, std::chrono::seconds after) {
  Cancellation cancellation;
  CancelledRequest result;
  Clock::time_point ended;
  std::thread uploader([&] {
    const CancelRequestsOnThisThread cancellable(cancellation);
    try {
      store.put("never.pt", "given up");
    } catch (const Cancelled&) {
      result.ended_cancelled = true;
    }
    ended = Clock::now();
  });
  std::this_thread::sleep_for(after);
  const auto cancelled = Clock::now();
  cancellation.cancel();
  uploader.join();
  result.went_on_for = ended - cancelled;
  return result;
}

// Riding out a refusing store (waiting between tries) ends as soon as it is cancelled, not after
// its patience.
TEST_F(StoreOutage, ARequestWaitingForARefusingStoreEndsOnceCancelled) {
  RetryingStore retrying(plain(), 600s, 200ms);
  store_.stop();
  const auto request = put_cancelled(retrying, 6s);
  EXPECT_TRUE(request.ended_cancelled);
  EXPECT_LT(request.went_on_for, 2s) << request.went_on_for.count() << " s";
}

// A transfer to a frozen store that would stall for a minute before curl gives it up is aborted
// by the cancel (curl's progress callback, once a second).
TEST_F(StoreOutage, ATransferToAFrozenStoreIsAbortedOnceCancelled) {
  RetryingStore retrying(plain("", 60s), 600s, 200ms);
  store_.freeze();
  const auto request = put_cancelled(retrying, 4s);
  store_.thaw();
  EXPECT_TRUE(request.ended_cancelled);
  EXPECT_LT(request.went_on_for, 3s) << request.went_on_for.count() << " s";
}

}  // namespace
}  // namespace cifar::storage
