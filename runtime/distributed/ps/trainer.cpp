#include "distributed/ps/trainer.h"

#include "distributed/ps/exchange.h"
#include "train/loop.h"

namespace cifar::ps {

train::TrainResult run_ps_trainer(const train::TrainConfig& config, const train::Fence& fence) {
  ParameterServerExchange exchange(config, fence);
  return train::run_training(config, exchange, fence);
}

}  // namespace cifar::ps
