// Where an all-reduce rank learns who it is: the PyTorch env, TF_CONFIG, mpirun's env.
#include "cluster/ranks.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace cifar::cluster {
namespace {

EnvLookup env_of(const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(Ranks, PyTorchEnvironment) {
  const auto r = ranks_from_env(env_of({{"MASTER_ADDR", "10.0.0.5"},
                                        {"MASTER_PORT", "1234"},
                                        {"WORLD_SIZE", "4"},
                                        {"RANK", "3"},
                                        {"LOCAL_RANK", "1"}}),
                                std::nullopt);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->rank, 3);
  EXPECT_EQ(r->world_size, 4);
  EXPECT_EQ(r->local_rank, 1);
  EXPECT_EQ(r->master_addr, "10.0.0.5");
  EXPECT_EQ(r->master_port, 1234);
}

TEST(Ranks, TfConfigMasterAndWorkersInOrderStoreOnTheMastersHostAtTheC10dPort) {
  const auto job =
      parse_tf_config(R"({"cluster":{"master":["j-master-0.j:2222"],"worker":["j-worker-0.j:2222",)"
                      R"("j-worker-1.j:2222"]},"task":{"type":"worker","index":1}})");
  const auto r = ranks_from_env(env_of({}), job);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->rank, 2);
  EXPECT_EQ(r->world_size, 3);
  EXPECT_EQ(r->master_addr, "j-master-0.j");
  EXPECT_EQ(r->master_port, 29500);
}

TEST(Ranks, MpirunEnvironment) {
  const auto r = ranks_from_env(env_of({{"OMPI_COMM_WORLD_SIZE", "2"},
                                        {"OMPI_COMM_WORLD_RANK", "1"},
                                        {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}}),
                                std::nullopt);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->rank, 1);
  EXPECT_EQ(r->world_size, 2);
  EXPECT_EQ(r->master_addr, "127.0.0.1");
}

TEST(Ranks, NoneAndBadValues) {
  EXPECT_FALSE(ranks_from_env(env_of({}), std::nullopt));
  EXPECT_THROW(ranks_from_env(env_of({{"WORLD_SIZE", "2"}, {"RANK", "2"}}), std::nullopt),
               std::invalid_argument);
  EXPECT_THROW(ranks_from_env(env_of({{"WORLD_SIZE", "two"}, {"RANK", "0"}}), std::nullopt),
               std::invalid_argument);
  EXPECT_THROW(ranks_from_env(env_of({{"WORLD_SIZE", "2"}}), std::nullopt), std::invalid_argument);
  EXPECT_THROW(
      ranks_from_env(env_of({{"WORLD_SIZE", "2"}, {"RANK", "0"}, {"MASTER_PORT", "70000"}}),
                     std::nullopt),
      std::invalid_argument);
}

}  // namespace
}  // namespace cifar::cluster
