// The CifarTrainJob CRD (deploy/crds/) installed in a real kube-apiserver: valid jobs are stored
// with their defaults, invalid ones are refused by `kubectl apply` with a message naming the
// problem, the status is a subresource, and `kubectl get ctj` shows the printer columns.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/process.h"

namespace {

using cifar::testing::ProcessResult;
using cifar::testing::run_process;
using cifar::testing::TempDir;

const std::string kSource = CIFAR_SOURCE_DIR;

ProcessResult kubectl(std::vector<std::string> args) {
  const char* kubeconfig = std::getenv("CIFAR_KUBECONFIG");
  if (kubeconfig == nullptr)
    throw std::runtime_error("CIFAR_KUBECONFIG is not set (ctest sets it)");
  args.insert(args.begin(), {"kubectl", "--kubeconfig", kubeconfig});
  return run_process(args);
}

class CifarTrainJobCrd : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const auto created = kubectl({"apply", "--server-side", "-f",
                                  kSource + "/deploy/crds/cifartrain.io_cifartrainjobs.yaml"});
    ASSERT_EQ(created.exit_code, 0) << created.output;
    const auto established = kubectl({"wait", "--for=condition=Established", "--timeout=60s",
                                      "crd/cifartrainjobs.cifartrain.io"});
    ASSERT_EQ(established.exit_code, 0) << established.output;
  }

  // Applies `manifest` (YAML text) in namespace `namespace_`.
  ProcessResult apply(const std::string& manifest) {
    const auto path = dir_.path() / ("manifest-" + std::to_string(files_++) + ".yaml");
    std::ofstream(path) << manifest;
    return kubectl({"apply", "-n", namespace_, "-f", path.string()});
  }

  nlohmann::json get(const std::string& name) {
    const auto got = kubectl({"get", "ctj", name, "-n", namespace_, "-o", "json"});
    EXPECT_EQ(got.exit_code, 0) << got.output;
    return nlohmann::json::parse(got.output);
  }

  void SetUp() override {
    // A namespace per test: names never collide, whatever earlier tests left.
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    namespace_ = "crd-" + std::to_string(std::hash<std::string>{}(info->name()) % 1000000);
    kubectl({"create", "namespace", namespace_});
  }

  TempDir dir_;
  int files_ = 0;
  std::string namespace_;
};

// A valid all-reduce job whose spec lines can be swapped for invalid ones.
std::string job(const std::string& name, const std::string& spec) {
  return "apiVersion: cifartrain.io/v1alpha1\nkind: CifarTrainJob\nmetadata:\n  name: " + name +
         "\nspec:\n" + spec;
}

const std::string kValidSpec =
    "  model: {name: resnet20}\n"
    "  dataset: {name: synthetic}\n"
    "  strategy: {type: AllReduce}\n"
    "  replicaSpecs:\n"
    "    Worker: {replicas: 2}\n";

// kValidSpec with spec.dataset's fields `dataset`, then the lines `more`.
std::string with_dataset(const std::string& dataset, const std::string& more = "") {
  return kValidSpec.substr(0, kValidSpec.find("  dataset")) + "  dataset: {" + dataset + "}\n" +
         kValidSpec.substr(kValidSpec.find("  strategy")) + more;
}

TEST_F(CifarTrainJobCrd, ExamplesAreStoredWithTheSchemaDefaults) {
  for (const auto* example : {"ps-job.yaml", "s3-ps-job.yaml", "allreduce-job.yaml",
                              "gpu-allreduce-job.yaml", "queued-jobs.yaml"}) {
    const auto applied =
        kubectl({"apply", "-n", namespace_, "-f", kSource + "/deploy/examples/" + example});
    EXPECT_EQ(applied.exit_code, 0) << example << ": " << applied.output;
  }
  const auto ps = get("cifar10-ps");
  EXPECT_EQ(ps["spec"]["training"]["epochs"], 2);                 // given
  EXPECT_EQ(ps["spec"]["training"]["optimizer"]["name"], "sgd");  // defaults
  EXPECT_EQ(ps["spec"]["training"]["learningRate"]["schedule"], "onecycle");
  EXPECT_EQ(ps["spec"]["training"]["precision"], "auto");
  EXPECT_EQ(ps["spec"]["runPolicy"]["restartPolicy"], "OnFailure");
  EXPECT_EQ(ps["spec"]["runPolicy"]["backoffLimit"], 3);
  EXPECT_EQ(ps["spec"]["runPolicy"]["nodeFailureGraceSeconds"], 30);
  EXPECT_EQ(ps["spec"]["checkpoint"]["keep"], 3);
  EXPECT_EQ(ps["spec"]["strategy"]["parameterServer"]["mode"], "sync");
  // the image scripts/build-images.sh makes
  EXPECT_EQ(ps["spec"]["image"], "localhost/cifartrain/runtime:dev");
  const auto s3 = get("cifar10-ps-s3");
  EXPECT_EQ(s3["spec"]["checkpoint"]["uri"], "s3://checkpoints/runs");
  EXPECT_EQ(s3["spec"]["checkpoint"]["keep"], 3);
  const auto ar = get("alexnet-allreduce");
  EXPECT_EQ(ar["spec"]["strategy"]["allReduce"]["overlap"], true);
  EXPECT_EQ(ar["spec"]["replicaSpecs"]["Worker"]["resources"]["limits"]["nvidia.com/gpu"], 1);
  EXPECT_EQ(ar["spec"]["runPolicy"]["restartPolicy"], "ExitCode");
}

TEST_F(CifarTrainJobCrd, UnknownFieldsAreRefusedOrWithValidationOffPruned) {
  const auto manifest = job("pruned", kValidSpec + "  notAField: 3\n");
  // kubectl asks the server for strict field validation: a typo is an error, not lost silently.
  const auto strict = apply(manifest);
  EXPECT_NE(strict.exit_code, 0);
  EXPECT_NE(strict.output.find("unknown field \"spec.notAField\""), std::string::npos)
      << strict.output;
  // Without it the structural schema prunes the field instead of storing it.
  const auto path = dir_.path() / "unvalidated.yaml";
  std::ofstream(path) << manifest;
  const auto lax = kubectl({"apply", "-n", namespace_, "--validate=false", "-f", path.string()});
  ASSERT_EQ(lax.exit_code, 0) << lax.output;
  EXPECT_FALSE(get("pruned")["spec"].contains("notAField"));
}

struct InvalidCase {
  const char* what;
  std::string spec;
  const char* message;  // kubectl's error must contain it
};

// An all-reduce job whose Worker spec is `worker` (its fields, without braces).
std::string elastic_spec(const std::string& worker) {
  return "  model: {name: resnet20}\n  dataset: {name: synthetic}\n  strategy: {type: AllReduce}\n"
         "  replicaSpecs:\n    Worker: {" +
         worker + "}\n";
}

TEST_F(CifarTrainJobCrd, InvalidSpecsAreRefusedWithAMessageNamingTheProblem) {
  const std::vector<InvalidCase> cases = {
      {"two masters",
       "  model: {name: resnet20}\n  dataset: {name: synthetic}\n  strategy: {type: AllReduce}\n"
       "  replicaSpecs:\n    Master: {replicas: 2}\n",
       "at most one Master"},
      {"two evaluators",
       "  model: {name: resnet20}\n  dataset: {name: synthetic}\n  strategy: {type: AllReduce}\n"
       "  replicaSpecs:\n    Worker: {replicas: 1}\n    Evaluator: {replicas: 2}\n",
       "at most one Evaluator"},
      {"an evaluator without a shared checkpoint volume",
       kValidSpec + "    Evaluator: {replicas: 1}\n",
       "an Evaluator needs checkpoint.volume or checkpoint.uri"},
      {"a checkpoint URI that is not s3://bucket",
       kValidSpec + "  checkpoint: {uri: 'gs://b/x', s3: {credentialsSecret: k}}\n",
       "spec.checkpoint.uri in body should match"},
      {"a checkpoint URI with a bucket name S3 refuses",
       kValidSpec + "  checkpoint: {uri: 's3://Team_Bucket/x', s3: {credentialsSecret: k}}\n",
       "spec.checkpoint.uri in body should match"},
      {"a checkpoint volume and URI",
       kValidSpec + "  checkpoint: {uri: 's3://ckpt', s3: {credentialsSecret: k}, volume: "
                    "{claimName: c}}\n",
       "checkpoint.uri is an alternative to checkpoint.volume"},
      {"a checkpoint URI without credentials", kValidSpec + "  checkpoint: {uri: 's3://ckpt'}\n",
       "checkpoint.uri needs checkpoint.s3.credentialsSecret"},
      {"an s3:// resumeFrom without a store",
       kValidSpec + "  checkpoint: {resumeFrom: 's3://ckpt/ns/run-1'}\n",
       "an s3:// checkpoint.resumeFrom needs checkpoint.uri"},
      {"an endpoint that is not a URL",
       kValidSpec + "  checkpoint: {uri: 's3://ckpt', s3: {credentialsSecret: k, endpoint: "
                    "'store:8333'}}\n",
       "spec.checkpoint.s3.endpoint in body should match"},
      {"PS replicas with all-reduce", kValidSpec + "    PS: {replicas: 1}\n",
       "replicaSpecs.PS needs strategy.type ParameterServer"},
      {"parameter server without a PS",
       "  model: {name: resnet20}\n  dataset: {name: synthetic}\n  strategy: {type: "
       "ParameterServer}\n"
       "  replicaSpecs:\n    Worker: {replicas: 2}\n",
       "strategy ParameterServer needs replicaSpecs.PS.replicas >= 1"},
      {"neither master nor workers",
       "  model: {name: resnet20}\n  dataset: {name: synthetic}\n  strategy: {type: AllReduce}\n"
       "  replicaSpecs:\n    Evaluator: {replicas: 1}\n",
       "a job needs a Master or at least one Worker"},
      {"half a GPU",
       "  model: {name: resnet20}\n  dataset: {name: synthetic}\n  strategy: {type: AllReduce}\n"
       "  replicaSpecs:\n    Worker:\n      replicas: 2\n      resources:\n"
       "        limits: {nvidia.com/gpu: 500m}\n",
       "nvidia.com/gpu must be a whole number of GPUs"},
      {"all-reduce settings on a PS job",
       "  model: {name: resnet20}\n  dataset: {name: synthetic}\n"
       "  strategy: {type: ParameterServer, allReduce: {backend: gloo}}\n"
       "  replicaSpecs:\n    PS: {replicas: 1}\n    Worker: {replicas: 2}\n",
       "strategy.allReduce is only for strategy.type AllReduce"},
      {"staleness outside ssp",
       "  model: {name: resnet20}\n  dataset: {name: synthetic}\n"
       "  strategy: {type: ParameterServer, parameterServer: {mode: async, staleness: 3}}\n"
       "  replicaSpecs:\n    PS: {replicas: 1}\n    Worker: {replicas: 2}\n",
       "staleness is only for mode ssp"},
      {"unknown model", "  model: {name: vgg}\n" + kValidSpec.substr(kValidSpec.find("  dataset")),
       "Unsupported value: \"vgg\""},
      {"zero epochs", kValidSpec + "  training: {epochs: 0}\n",
       "spec.training.epochs: Invalid value: 0: spec.training.epochs in body should be greater "
       "than "
       "or equal to 1"},
      {"fp16 (no loss scaling yet)", kValidSpec + "  training: {precision: fp16}\n",
       "Unsupported value: \"fp16\""},
      {"unknown restart policy", kValidSpec + "  runPolicy: {restartPolicy: Always}\n",
       "Unsupported value: \"Always\""},
      {"a dataset URI without the checkpoint store",
       with_dataset("name: cifar10, uri: 's3://data/cifar10'"),
       "dataset.uri is read from the checkpoint store"},
      {"a dataset URI and a volume",
       with_dataset("name: cifar10, uri: 's3://data/cifar10', volume: {claimName: d}",
                    "  checkpoint: {uri: 's3://ckpt', s3: {credentialsSecret: k}}\n"),
       "dataset.uri is an alternative to dataset.volume and dataset.download"},
      {"a dataset URI of synthetic data",
       with_dataset("name: synthetic, uri: 's3://data/x'",
                    "  checkpoint: {uri: 's3://ckpt', s3: {credentialsSecret: k}}\n"),
       "dataset.uri holds cifar10 or cifar100 binary files"},
      {"volume and download", with_dataset("name: cifar10, volume: {claimName: d}, download: {}"),
       "give either volume or download, not both"},
      {"a queue that cannot be a LocalQueue's name",
       kValidSpec + "  runPolicy: {schedulingPolicy: {queue: Team_A}}\n",
       "spec.runPolicy.schedulingPolicy.queue in body should match"},
      {"no strategy",
       "  model: {name: resnet20}\n  dataset: {name: synthetic}\n  replicaSpecs: {}\n",
       "spec.strategy: Required value"},
      {"elastic workers without a maximum", elastic_spec("replicas: 2, minReplicas: 1"),
       "give minReplicas and maxReplicas together"},
      {"elastic workers whose minimum is above their maximum",
       elastic_spec("replicas: 2, minReplicas: 3, maxReplicas: 2"),
       "minReplicas must be at most maxReplicas"},
      {"elastic workers asked for more than their maximum",
       elastic_spec("replicas: 5, minReplicas: 1, maxReplicas: 4"),
       "replicas must be within [minReplicas, maxReplicas]"},
      {"elastic workers with a minimum of 0",
       elastic_spec("replicas: 2, minReplicas: 0, maxReplicas: 4"),
       "spec.replicaSpecs.Worker.minReplicas: Invalid value: 0"},
      {"an elastic evaluator",
       elastic_spec("replicas: 2, minReplicas: 1, maxReplicas: 4") +
           "    Evaluator: {replicas: 1, minReplicas: 1, maxReplicas: 1}\n"
           "  checkpoint: {volume: {claimName: c}}\n",
       "minReplicas and maxReplicas are for replicaSpecs.Worker only"},
      {"an elastic all-reduce job with a Master",
       elastic_spec("replicas: 2, minReplicas: 1, maxReplicas: 4") + "    Master: {replicas: 1}\n",
       "an elastic all-reduce job's trainers are its Workers"},
      {"an elastic parameter-server job without a Master",
       "  model: {name: resnet20}\n  dataset: {name: synthetic}\n"
       "  strategy: {type: ParameterServer}\n  replicaSpecs:\n    PS: {replicas: 1}\n"
       "    Worker: {replicas: 2, minReplicas: 1, maxReplicas: 4}\n",
       "an elastic parameter-server job needs a Master"},
      {"a topology without a queue",
       kValidSpec + "  runPolicy: {schedulingPolicy: {topology: {required: cifartrain.io/rack}}}\n",
       "topology needs a queue"},
      {"a topology both required and preferred",
       kValidSpec + "  runPolicy: {schedulingPolicy: {queue: team-a, topology: "
                    "{required: cifartrain.io/rack, preferred: cifartrain.io/block}}}\n",
       "give one of required or preferred"},
      {"a topology for an elastic job",
       elastic_spec("replicas: 2, minReplicas: 1, maxReplicas: 4") +
           "  checkpoint: {volume: {claimName: c}}\n"
           "  runPolicy: {schedulingPolicy: {queue: team-a, topology: {required: rack}}}\n",
       "topology is not for an elastic job"},
      {"a topology of neither",
       kValidSpec + "  runPolicy: {schedulingPolicy: {queue: team-a, topology: {}}}\n",
       "give one of required or preferred"},
  };
  int n = 0;
  for (const auto& c : cases) {
    const auto name = "invalid-" + std::to_string(n++);
    const auto applied = apply(job(name, c.spec));
    EXPECT_NE(applied.exit_code, 0) << c.what << " was accepted";
    EXPECT_NE(applied.output.find(c.message), std::string::npos)
        << c.what << ": expected \"" << c.message << "\" in:\n"
        << applied.output;
    // Nothing was stored.
    EXPECT_NE(kubectl({"get", "ctj", name, "-n", namespace_}).exit_code, 0) << c.what;
  }
}

TEST_F(CifarTrainJobCrd, NamesThatCannotNameAServiceOrFitAHostnameAreRefused) {
  // A dot: a valid object name, but no Service (DNS-1035 label) can carry it.
  const auto dotted = apply(job("my.job", kValidSpec));
  EXPECT_NE(dotted.exit_code, 0);
  EXPECT_NE(dotted.output.find("metadata.name must be a DNS-1035 label"), std::string::npos)
      << dotted.output;
  // 52 characters: <name>-worker-1023 would be 64.
  const std::string long_name(52, 'a');
  const auto too_long = apply(job(long_name, kValidSpec));
  EXPECT_NE(too_long.exit_code, 0);
  EXPECT_NE(too_long.output.find("metadata.name must be at most 51 characters"), std::string::npos)
      << too_long.output;
  EXPECT_NE(kubectl({"get", "ctj", long_name, "-n", namespace_}).exit_code, 0);
  // 51 is the longest that fits.
  const auto longest = apply(job(std::string(51, 'a'), kValidSpec));
  EXPECT_EQ(longest.exit_code, 0) << longest.output;
}

TEST_F(CifarTrainJobCrd, AJobsSizeCannotChangeButOtherFieldsCan) {
  ASSERT_EQ(apply(job("sized", kValidSpec)).exit_code, 0);
  auto resized = kValidSpec;
  resized.replace(resized.find("replicas: 2"), 11, "replicas: 3");
  const auto refused = apply(job("sized", resized));
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.output.find("replicas cannot change after the job is created"),
            std::string::npos)
      << refused.output;
  EXPECT_EQ(get("sized")["spec"]["replicaSpecs"]["Worker"]["replicas"], 2);
  // A role added later changes the size too.
  const auto added = apply(job("sized", kValidSpec + "    Evaluator: {replicas: 1}\n"));
  EXPECT_NE(added.exit_code, 0) << added.output;
  // Anything else may change (suspend, for instance).
  const auto suspended = apply(job("sized", kValidSpec + "  runPolicy: {suspend: true}\n"));
  EXPECT_EQ(suspended.exit_code, 0) << suspended.output;
  EXPECT_EQ(get("sized")["spec"]["runPolicy"]["suspend"], true);
}

// An elastic job's workers (minReplicas/maxReplicas) are resized by `kubectl scale`, through the
// CRD's scale subresource, within their bounds; the bounds themselves, and a fixed job's size,
// cannot change.
TEST_F(CifarTrainJobCrd, AnElasticJobsWorkersAreScaledWithinTheirBoundsAndAFixedJobsAreNot) {
  ASSERT_EQ(
      apply(job("elastic", elastic_spec("replicas: 2, minReplicas: 1, maxReplicas: 4"))).exit_code,
      0);
  const auto scaled = kubectl({"scale", "ctj/elastic", "-n", namespace_, "--replicas=4"});
  EXPECT_EQ(scaled.exit_code, 0) << scaled.output;
  EXPECT_EQ(get("elastic")["spec"]["replicaSpecs"]["Worker"]["replicas"], 4);
  const auto down = kubectl({"scale", "ctj/elastic", "-n", namespace_, "--replicas=1"});
  EXPECT_EQ(down.exit_code, 0) << down.output;
  EXPECT_EQ(get("elastic")["spec"]["replicaSpecs"]["Worker"]["replicas"], 1);
  const auto beyond = kubectl({"scale", "ctj/elastic", "-n", namespace_, "--replicas=5"});
  EXPECT_NE(beyond.exit_code, 0);
  EXPECT_NE(beyond.output.find("replicas must be within [minReplicas, maxReplicas]"),
            std::string::npos)
      << beyond.output;
  const auto bounds = kubectl({"patch", "ctj", "elastic", "-n", namespace_, "--type=merge", "-p",
                               R"({"spec":{"replicaSpecs":{"Worker":{"maxReplicas":8}}}})"});
  EXPECT_NE(bounds.exit_code, 0);
  EXPECT_NE(bounds.output.find("spec.replicaSpecs cannot change"), std::string::npos)
      << bounds.output;
  EXPECT_EQ(get("elastic")["spec"]["replicaSpecs"]["Worker"]["maxReplicas"], 4);

  ASSERT_EQ(apply(job("fixed", kValidSpec)).exit_code, 0);
  const auto fixed = kubectl({"scale", "ctj/fixed", "-n", namespace_, "--replicas=3"});
  EXPECT_NE(fixed.exit_code, 0);
  EXPECT_NE(fixed.output.find("replicas cannot change after the job is created"), std::string::npos)
      << fixed.output;
  EXPECT_EQ(get("fixed")["spec"]["replicaSpecs"]["Worker"]["replicas"], 2);
}

// An edit of what the pods were made from would be accepted and silently ignored (epochs 2 -> 6,
// and the job trains 2): each such field is refused by name; runPolicy, which acts on change,
// stays editable.
TEST_F(CifarTrainJobCrd, AJobsSpecCannotChangeButItsRunPolicyCan) {
  ASSERT_EQ(apply(job("fixed", kValidSpec + "  training: {epochs: 2}\n")).exit_code, 0);
  const std::vector<std::pair<std::string, std::string>> edits = {
      {R"({"spec":{"training":{"epochs":6}}})", "spec.training cannot change"},
      {R"({"spec":{"model":{"name":"simplecnn"}}})", "spec.model cannot change"},
      {R"({"spec":{"image":"example.com/other:1"}})", "spec.image cannot change"},
      {R"({"spec":{"strategy":{"allReduce":{"backend":"gloo"}}}})", "spec.strategy cannot change"},
      {R"({"spec":{"replicaSpecs":{"Worker":{"template":{"metadata":{"labels":{"a":"b"}}}}}}})",
       "spec.replicaSpecs cannot change"},
      {R"({"spec":{"checkpoint":{"everySteps":5}}})", "spec.checkpoint cannot change"},
  };
  for (const auto& [patch, message] : edits) {
    const auto edited =
        kubectl({"patch", "ctj", "fixed", "-n", namespace_, "--type=merge", "-p", patch});
    EXPECT_NE(edited.exit_code, 0) << patch << " was accepted";
    EXPECT_NE(edited.output.find(message), std::string::npos) << patch << ":\n" << edited.output;
  }
  EXPECT_EQ(get("fixed")["spec"]["training"]["epochs"], 2);
  const auto run_policy = kubectl(
      {"patch", "ctj", "fixed", "-n", namespace_, "--type=merge", "-p",
       R"({"spec":{"runPolicy":{"suspend":true,"ttlSecondsAfterFinished":60,"activeDeadlineSeconds":600}}})"});
  EXPECT_EQ(run_policy.exit_code, 0) << run_policy.output;
  EXPECT_EQ(get("fixed")["spec"]["runPolicy"]["ttlSecondsAfterFinished"], 60);
}

TEST_F(CifarTrainJobCrd, AJobsQueueCannotChange) {
  ASSERT_EQ(apply(job("queued", kValidSpec + "  runPolicy: {schedulingPolicy: {queue: team-a}}\n"))
                .exit_code,
            0);
  const auto moved =
      apply(job("queued", kValidSpec + "  runPolicy: {schedulingPolicy: {queue: team-b}}\n"));
  EXPECT_NE(moved.exit_code, 0);
  EXPECT_NE(moved.output.find("queue cannot be changed"), std::string::npos) << moved.output;
  EXPECT_EQ(get("queued")["spec"]["runPolicy"]["schedulingPolicy"]["queue"], "team-a");
}

// Kueue places a pod group once, when it admits it: a topology asked for later would not move it.
TEST_F(CifarTrainJobCrd, AJobsTopologyCannotChange) {
  const auto with = [](const std::string& topology) {
    return kValidSpec + "  runPolicy: {schedulingPolicy: {queue: team-a, topology: " + topology +
           "}}\n";
  };
  ASSERT_EQ(apply(job("placed", with("{required: cifartrain.io/rack}"))).exit_code, 0);
  const auto widened = apply(job("placed", with("{preferred: cifartrain.io/rack}")));
  EXPECT_NE(widened.exit_code, 0);
  EXPECT_NE(widened.output.find("topology cannot be changed"), std::string::npos) << widened.output;
  EXPECT_EQ(get("placed")["spec"]["runPolicy"]["schedulingPolicy"]["topology"]["required"],
            "cifartrain.io/rack");
}

TEST_F(CifarTrainJobCrd, WholeGpusAreAcceptedAsNumbersOrStrings) {
  const auto spec = [](const std::string& gpus) {
    return "  model: {name: resnet20}\n  dataset: {name: synthetic}\n  strategy: {type: "
           "AllReduce}\n"
           "  replicaSpecs:\n    Worker:\n      replicas: 2\n      resources:\n"
           "        limits: {nvidia.com/gpu: " +
           gpus + ", cpu: 500m}\n";
  };
  EXPECT_EQ(apply(job("gpus-int", spec("2"))).exit_code, 0);
  EXPECT_EQ(apply(job("gpus-string", spec("'4'"))).exit_code, 0);
}

TEST_F(CifarTrainJobCrd, StatusIsASubresourceShownByKubectlGet) {
  ASSERT_EQ(apply(job("shown", kValidSpec)).exit_code, 0);
  // Written through the main resource, status is ignored...
  const auto ignored = kubectl({"patch", "ctj", "shown", "-n", namespace_, "--type=merge", "-p",
                                R"({"status":{"state":"Succeeded"}})"});
  EXPECT_EQ(ignored.exit_code, 0) << ignored.output;
  EXPECT_FALSE(get("shown").contains("status"));
  // ...and taken through the status subresource, as the operator writes it.
  const auto patched = kubectl(
      {"patch", "ctj", "shown", "-n", namespace_, "--subresource=status", "--type=merge", "-p",
       R"({"status":{"state":"Running","progress":{"epoch":7,"testAccuracy":0.8125,"imagesPerSecond":1520.5}}})"});
  ASSERT_EQ(patched.exit_code, 0) << patched.output;
  const auto table = kubectl({"get", "ctj", "shown", "-n", namespace_});
  ASSERT_EQ(table.exit_code, 0) << table.output;
  for (const auto* column :
       {"STATE", "EPOCH", "ACCURACY", "IMAGES/S", "AGE", "Running", "7", "0.8125", "1520.5"}) {
    EXPECT_NE(table.output.find(column), std::string::npos) << column << " in:\n" << table.output;
  }
}

}  // namespace
