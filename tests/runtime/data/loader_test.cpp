// The threaded loader: determinism, order, permutations, sharding, resume, shutdown, errors.
#include "data/loader.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <tuple>

#include "data/augment.h"
#include "tests/runtime/data/test_util.h"

namespace cifar::data {
namespace {

using testing::make_dataset;

// Images whose first two bytes spell the sample id, so a batch tells which samples it holds.
std::shared_ptr<const Dataset> id_dataset(int64_t n, int64_t c = 3, int64_t side = 32) {
  return std::make_shared<const Dataset>(
      make_dataset(n, c, side, side, 10, [](int64_t i, int64_t k) {
        if (k == 0) return static_cast<uint8_t>(i & 0xFF);
        if (k == 1) return static_cast<uint8_t>(i >> 8);
        return static_cast<uint8_t>((i * 31 + k * 3) & 0xFF);
      }));
}

LoaderOptions plain(int64_t batch, int workers) {
  LoaderOptions o;
  o.batch_size = batch;
  o.num_workers = workers;
  o.augment = false;  // with no normalisation stats, values are exactly byte / 255
  return o;
}

uint8_t byte_at(const Batch& b, int64_t j, int64_t k) {
  const float v = b.images[static_cast<size_t>(j * b.channels * b.height * b.width + k)];
  return static_cast<uint8_t>(std::lround(v * 255.0F));
}

std::vector<int64_t> ids_of(const Batch& b) {
  std::vector<int64_t> ids;
  for (int64_t j = 0; j < b.size; ++j) ids.push_back(byte_at(b, j, 0) + 256 * byte_at(b, j, 1));
  return ids;
}

std::vector<Batch> epoch(DataLoader& loader, int64_t e, int64_t first = 0) {
  loader.start_epoch(e, first);
  std::vector<Batch> out;
  while (auto b = loader.next()) out.push_back(std::move(*b));
  return out;
}

std::vector<int64_t> epoch_ids(DataLoader& loader, int64_t e) {
  std::vector<int64_t> ids;
  for (const auto& b : epoch(loader, e)) {
    for (int64_t id : ids_of(b)) ids.push_back(id);
  }
  return ids;
}

void expect_same(const std::vector<Batch>& a, const std::vector<Batch>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].index, b[i].index);
    EXPECT_EQ(a[i].size, b[i].size);
    EXPECT_EQ(a[i].labels, b[i].labels);
    EXPECT_EQ(a[i].images, b[i].images) << "batch " << i;  // bitwise: same floats
  }
}

LoaderOptions augmenting(int workers) {
  LoaderOptions o;
  o.batch_size = 16;
  o.num_workers = workers;
  o.seed = 42;
  o.augmentation.normalize = {{0.5F, 0.4F, 0.3F}, {0.2F, 0.25F, 0.3F}};
  return o;
}

TEST(Loader, SameBatchesWhateverTheNumberOfWorkers) {
  const auto data = id_dataset(200);
  DataLoader inline_loader(data, augmenting(0));
  DataLoader one(data, augmenting(1));
  DataLoader three(data, augmenting(3));
  for (int64_t e = 0; e < 2; ++e) {
    const auto reference = epoch(inline_loader, e);
    ASSERT_EQ(reference.size(), 13U);
    expect_same(reference, epoch(one, e));
    expect_same(reference, epoch(three, e));
  }
}

TEST(Loader, WithoutShuffleBatchesArriveInOrderAndExact) {
  const auto data = id_dataset(50);
  LoaderOptions o = plain(8, 3);
  o.shuffle = false;
  o.prefetch = 2;
  DataLoader loader(data, o);
  EXPECT_EQ(loader.batches_per_epoch(), 7);
  EXPECT_EQ(loader.samples_per_epoch(), 50);
  const auto batches = epoch(loader, 0);
  ASSERT_EQ(batches.size(), 7U);
  for (int64_t b = 0; b < 7; ++b) {
    const Batch& batch = batches[static_cast<size_t>(b)];
    EXPECT_EQ(batch.index, b);
    EXPECT_EQ(batch.size, b < 6 ? 8 : 2);
    EXPECT_EQ(batch.channels, 3);
    EXPECT_EQ(batch.height, 32);
    EXPECT_EQ(batch.width, 32);
    ASSERT_EQ(batch.images.size(), static_cast<size_t>(batch.size * 3072));
    for (int64_t j = 0; j < batch.size; ++j) {
      const int64_t id = b * 8 + j;
      EXPECT_EQ(batch.labels[static_cast<size_t>(j)], id % 10);
      for (int64_t k = 0; k < 3072; ++k) {
        ASSERT_EQ(batch.images[static_cast<size_t>(j * 3072 + k)],
                  static_cast<float>(data->image(id)[k]) / 255.0F);
      }
    }
  }
}

TEST(Loader, EachEpochIsADifferentPermutation) {
  const auto data = id_dataset(300);
  DataLoader loader(data, plain(32, 2));
  const auto e0 = epoch_ids(loader, 0);
  const auto e1 = epoch_ids(loader, 1);
  EXPECT_EQ(std::set<int64_t>(e0.begin(), e0.end()).size(), 300U);
  EXPECT_EQ(std::set<int64_t>(e1.begin(), e1.end()).size(), 300U);
  EXPECT_NE(e0, e1);
  std::vector<int64_t> identity(300);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_NE(e0, identity);
  EXPECT_EQ(e0, epoch_ids(loader, 0));  // a function of (seed, epoch) only

  LoaderOptions other = plain(32, 2);
  other.seed = 2;
  DataLoader other_seed(data, other);
  EXPECT_NE(e0, epoch_ids(other_seed, 0));
}

TEST(Loader, ShardsAreDisjointEqualShares) {
  const auto data = id_dataset(100);
  std::set<int64_t> all;
  for (int64_t rank = 0; rank < 3; ++rank) {
    LoaderOptions o = plain(10, 2);
    o.rank = rank;
    o.world_size = 3;
    DataLoader loader(data, o);
    EXPECT_EQ(loader.samples_per_epoch(), 33);
    EXPECT_EQ(loader.batches_per_epoch(), 4);
    const auto ids = epoch_ids(loader, 5);
    EXPECT_EQ(ids.size(), 33U);
    for (int64_t id : ids) EXPECT_TRUE(all.insert(id).second) << "sample " << id << " twice";
  }
  EXPECT_EQ(all.size(), 99U);

  // Rank r's share is every world_size-th entry of the single-rank permutation.
  DataLoader whole(data, plain(10, 1));
  const auto perm = epoch_ids(whole, 5);
  LoaderOptions o = plain(10, 1);
  o.rank = 1;
  o.world_size = 3;
  DataLoader rank1(data, o);
  const auto ids = epoch_ids(rank1, 5);
  for (size_t j = 0; j < ids.size(); ++j) EXPECT_EQ(ids[j], perm[1 + 3 * j]);
}

// A global batch: batch b covers the same positions of the epoch's permutation whatever the
// world size, so that a job whose world changes between batches drops and repeats nothing (the
// rule of elastic jobs, docs/ARCHITECTURE.md), and each sample is augmented the same at any size.
TEST(Loader, AGlobalBatchCoversTheSamePositionsWhateverTheWorld) {
  const auto data = id_dataset(100);
  constexpr int64_t kGlobal = 12;
  const auto loader_for = [&](int64_t rank, int64_t world, LoaderOptions o) {
    o.rank = rank;
    o.world_size = world;
    o.global_batch = kGlobal;
    return std::make_unique<DataLoader>(data, o);
  };
  // The permutation, in global batches, as one rank reads it.
  const auto whole = epoch(*loader_for(0, 1, plain(1, 1)), 2);
  ASSERT_EQ(whole.size(), 9U);  // 8 whole batches and the 4 left
  for (const int64_t world : {2, 3, 5}) {
    std::vector<std::unique_ptr<DataLoader>> ranks;
    for (int64_t r = 0; r < world; ++r) ranks.push_back(loader_for(r, world, plain(1, 2)));
    // What is left after the whole batches, in a multiple of the world: every rank has a sample.
    const int64_t batches = world == 5 ? 8 : 9;
    std::vector<std::vector<Batch>> read;
    for (auto& rank : ranks) {
      EXPECT_EQ(rank->batches_per_epoch(), batches) << world;
      read.push_back(epoch(*rank, 2));
    }
    for (int64_t b = 0; b < batches; ++b) {
      std::multiset<int64_t> got;
      int64_t smallest = kGlobal;
      int64_t largest = 0;
      for (const auto& rank : read) {
        const auto& batch = rank[static_cast<size_t>(b)];
        EXPECT_EQ(batch.global_size, b == 8 ? 4 / world * world : kGlobal) << "batch " << b;
        for (const int64_t id : ids_of(batch)) got.insert(id);
        smallest = std::min(smallest, batch.size);
        largest = std::max(largest, batch.size);
      }
      auto wanted = ids_of(whole[static_cast<size_t>(b)]);
      if (b == 8) wanted.resize(static_cast<size_t>(4 / world * world));  // 4 left: 4, 3 of them
      EXPECT_EQ(got, std::multiset<int64_t>(wanted.begin(), wanted.end()))
          << "batch " << b << ", world " << world;
      EXPECT_LE(largest - smallest, 1) << "batch " << b << ", world " << world;
      EXPECT_GE(smallest, 1);
    }
  }
  // The world changes after batch 3 (3 ranks, then 2): every sample of the epoch once.
  std::multiset<int64_t> seen;
  for (int64_t r = 0; r < 3; ++r) {
    auto rank = loader_for(r, 3, plain(1, 1));
    rank->start_epoch(2);
    for (int b = 0; b < 3; ++b) {
      for (const int64_t id : ids_of(*rank->next())) seen.insert(id);
    }
  }
  for (int64_t r = 0; r < 2; ++r) {
    for (const auto& batch : epoch(*loader_for(r, 2, plain(1, 1)), 2, 3)) {
      for (const int64_t id : ids_of(batch)) seen.insert(id);
    }
  }
  EXPECT_EQ(seen.size(), 100U);
  EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), 100U);
  // Each position (so each sample) is cropped and flipped the same at any world size: rank r's
  // j-th sample of batch b is at position b x 12 + r + j x world.
  const auto images_by_position = [&](int64_t world) {
    std::map<int64_t, std::vector<float>> images;
    for (int64_t r = 0; r < world; ++r) {
      for (const auto& batch : epoch(*loader_for(r, world, augmenting(1)), 4)) {
        const auto values = batch.channels * batch.height * batch.width;
        for (int64_t j = 0; j < batch.size; ++j) {
          const auto at = batch.images.begin() + j * values;
          images[batch.index * kGlobal + r + j * world].assign(at, at + values);
        }
      }
    }
    images.erase(images.lower_bound(96), images.end());  // the whole batches, which both have
    return images;
  };
  const auto in_three = images_by_position(3);
  EXPECT_EQ(in_three.size(), 96U);
  EXPECT_EQ(in_three, images_by_position(2));
}

TEST(Loader, ResumeAtBatchKEqualsTheOriginalFromK) {
  const auto data = id_dataset(150);
  DataLoader loader(data, augmenting(2));
  const auto full = epoch(loader, 3);
  ASSERT_EQ(full.size(), 10U);
  for (int64_t k : {0, 1, 6, 9, 10}) {
    DataLoader fresh(data, augmenting(3));
    const auto rest = epoch(fresh, 3, k);
    expect_same(std::vector<Batch>(full.begin() + k, full.end()), rest);
  }
}

TEST(Loader, RestartMidEpochDropsTheOldEpoch) {
  const auto data = id_dataset(400);
  DataLoader loader(data, augmenting(2));
  loader.start_epoch(0);
  ASSERT_TRUE(loader.next().has_value());
  ASSERT_TRUE(loader.next().has_value());
  // Workers are busy with epoch 0 batches; none of them may leak into epoch 1.
  const auto restarted = epoch(loader, 1, 4);
  DataLoader reference(data, augmenting(0));
  const auto expected = epoch(reference, 1);
  expect_same(std::vector<Batch>(expected.begin() + 4, expected.end()), restarted);
}

TEST(Loader, DropLast) {
  const auto data = id_dataset(100);
  LoaderOptions o = plain(32, 2);
  DataLoader keep(data, o);
  EXPECT_EQ(keep.batches_per_epoch(), 4);
  const auto kept = epoch(keep, 0);
  ASSERT_EQ(kept.size(), 4U);
  EXPECT_EQ(kept.back().size, 4);
  o.drop_last = true;
  DataLoader drop(data, o);
  EXPECT_EQ(drop.batches_per_epoch(), 3);
  const auto dropped = epoch(drop, 0);
  ASSERT_EQ(dropped.size(), 3U);
  for (const auto& b : dropped) EXPECT_EQ(b.size, 32);
  EXPECT_FALSE(drop.next().has_value());  // stays done
}

TEST(Loader, AugmentedImagesAreCropsAndFlipsOfTheirSource) {
  const auto data = id_dataset(64);
  LoaderOptions o = augmenting(2);
  o.shuffle = false;
  DataLoader loader(data, o);
  const Augmenter aug(3, 32, 32, o.augmentation);
  std::vector<float> candidate(3072);
  std::set<std::tuple<int, int, bool>> used;
  for (const auto& b : epoch(loader, 0)) {
    for (int64_t j = 0; j < b.size; ++j) {
      const int64_t id = b.index * 16 + j;
      const float* got = b.images.data() + j * 3072;
      bool found = false;
      for (int dy = -4; dy <= 4 && !found; ++dy) {
        for (int dx = -4; dx <= 4 && !found; ++dx) {
          for (bool flip : {false, true}) {
            aug.apply(data->image(id), candidate.data(), {dy, dx, flip});
            if (std::equal(candidate.begin(), candidate.end(), got)) {
              found = true;
              used.emplace(dy, dx, flip);
              break;
            }
          }
        }
      }
      EXPECT_TRUE(found) << "sample " << id << " is no crop/flip of its source";
    }
  }
  EXPECT_GT(used.size(), 20U);  // really random, not one fixed transform
}

TEST(Loader, WorkerErrorsSurfaceInNext) {
  Dataset bad = make_dataset(64);
  bad.labels[50] = 99;
  const auto data = std::make_shared<const Dataset>(std::move(bad));
  for (int workers : {0, 2}) {
    LoaderOptions o = plain(16, workers);
    o.shuffle = false;
    DataLoader loader(data, o);
    loader.start_epoch(0);
    for (int b = 0; b < 3; ++b) ASSERT_TRUE(loader.next().has_value());
    testing::expect_data_error([&] { loader.next(); }, {"sample 50", "label 99"});
    EXPECT_FALSE(loader.next().has_value());
  }
}

TEST(Loader, DestructorStopsMidEpochPromptly) {
  const auto data = id_dataset(2000);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) {
    LoaderOptions o = augmenting(3);
    o.prefetch = 8;
    DataLoader loader(data, o);
    loader.start_epoch(0);
    ASSERT_TRUE(loader.next().has_value());
  }  // destroyed with workers busy and batches queued
  { DataLoader never_started(data, augmenting(2)); }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
}

TEST(Loader, OtherShapesWork) {
  const auto data = id_dataset(10, 1, 28);
  LoaderOptions o = augmenting(2);
  o.augmentation.normalize = {{0.3F}, {0.3F}};
  DataLoader loader(data, o);
  const auto batches = epoch(loader, 0);
  ASSERT_EQ(batches.size(), 1U);
  EXPECT_EQ(batches[0].channels, 1);
  EXPECT_EQ(batches[0].height, 28);
  EXPECT_EQ(batches[0].images.size(), 10U * 28 * 28);
}

TEST(Loader, RejectsMisuse) {
  const auto data = id_dataset(10);
  EXPECT_THROW(DataLoader(nullptr, plain(4, 1)), std::invalid_argument);
  EXPECT_THROW(DataLoader(data, plain(0, 1)), std::invalid_argument);
  LoaderOptions o = plain(4, 1);
  o.rank = 2;
  o.world_size = 2;
  EXPECT_THROW(DataLoader(data, o), std::invalid_argument);
  Dataset short_images = make_dataset(3);
  short_images.images.pop_back();
  EXPECT_THROW(DataLoader(std::make_shared<const Dataset>(short_images), plain(4, 1)),
               std::invalid_argument);
  DataLoader loader(data, plain(4, 1));
  EXPECT_THROW(loader.next(), std::logic_error);
  EXPECT_THROW(loader.start_epoch(0, 4), std::invalid_argument);  // 3 batches
  loader.start_epoch(0, 3);
  EXPECT_FALSE(loader.next().has_value());
  EXPECT_EQ(&loader.dataset(), data.get());
}

}  // namespace
}  // namespace cifar::data
