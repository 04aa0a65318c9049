#!/usr/bin/env bash
# The local cluster's object store (`make cluster S3=1`): deploy/object-store on node 1's bridge at
# http://10.244.0.1:8333 with the bucket `checkpoints`, and CIFAR-10's binary files in it under
# data/cifar10: what deploy/examples/s3-ps-job.yaml expects, as written. The files are the whole
# set (scripts/cifar10-data.sh) unless DATA_DIR names others (the e2e tests' slice). Then it
# prints the command that makes the example's Secret with the store's keys.
#   deploy/local-cluster/object-store.sh RUN_DIR [DATA_DIR]
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
run=${1:?usage: object-store.sh RUN_DIR [DATA_DIR]}
data=${2:-}
put=()
if [ -n "$data" ] || data=$(bash "$repo/scripts/cifar10-data.sh"); then
  put=(--put "$data=checkpoints/data/cifar10")
else
  echo "object-store.sh: no CIFAR-10 to put in the bucket (above): dataset.uri jobs will find none" >&2
fi
bash "$repo/deploy/object-store/start.sh" "$run" --address 10.244.0.1 --port 8333 \
  --bucket checkpoints "${put[@]}"
echo "then: kubectl create secret generic checkpoint-store-keys --from-env-file=$run/credentials.env"
