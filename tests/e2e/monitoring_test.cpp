// Monitoring end to end: a real Prometheus (deploy/tools/build.sh prometheus) on the host scrapes
// the local cluster through Kubernetes service discovery with deploy/prometheus's config and
// rules, while a parameter-server job (with an evaluator) and an all-reduce job train. Then every
// panel of the Grafana dashboard (deploy/grafana/cifartrain.json) is evaluated against it, its
// variables substituted, and must return data; the dashboard's variables must list the jobs; and
// every alert rule must have evaluated without error on the real series.
#include <curl/curl.h>

#include <memory>
#include <regex>

#include "tests/e2e/cluster_fixture.h"

namespace cifar::e2e {
namespace {

namespace fs = std::filesystem;

const fs::path kSource = CIFAR_SOURCE_DIR;
// Scrapes every 5 s here (the config's default is 15 s) so that short test jobs give rate()
// several samples; Grafana's $__rate_interval is four scrape intervals.
constexpr int kScrapeSeconds = 5;
const std::string kRateInterval = "20s";

std::string url_encoded(const std::string& text) {
  const std::unique_ptr<char, decltype(&curl_free)> escaped(
      curl_easy_escape(nullptr, text.c_str(), static_cast<int>(text.size())), curl_free);
  return escaped ? escaped.get() : "";
}

// Every panel with its queries, rows' nested panels included.
struct Panel {
  std::string title;
  std::vector<std::string> queries;
  std::vector<std::string> legends;  // each query's legendFormat
};
void collect_panels(const json& panels, std::vector<Panel>& out) {
  for (const auto& panel : panels) {
    if (panel.contains("panels")) collect_panels(panel["panels"], out);
    if (panel.value("type", "") == "row") continue;
    Panel p{panel.value("title", "(untitled)"), {}, {}};
    for (const auto& target : panel.value("targets", json::array())) {
      if (!target.contains("expr")) continue;
      p.queries.push_back(target["expr"]);
      p.legends.push_back(target.value("legendFormat", ""));
    }
    out.push_back(p);
  }
}

// A query's range result holds at least one sample that is a number: a histogram quantile of a
// series that saw nothing is NaN (0/0), which a panel shows as no data.
bool has_a_number(const json& result) {
  for (const auto& series : result["data"]["result"]) {
    for (const auto& sample : series["values"]) {
      const auto value = sample[1].get<std::string>();
      if (value != "NaN") return true;
    }
  }
  return false;
}

class Monitoring : public Cluster {
 protected:
  // Prometheus on the host: the cluster's kubeconfig for service discovery (pods' IPs are
  // routable from the node), the repository's rules, a scratch TSDB.
  void start_prometheus() {
    const auto bin = tool_dir("prometheus");
    const auto config = volumes_ / "prometheus.yml";
    const auto rendered = run_process({"bash", "-c", R"("$0" "$1" > "$2")",
                                       (kSource / "deploy/prometheus/render-config.sh").string(),
                                       cluster_file("kubeconfig"), config.string()});
    ASSERT_EQ(rendered.exit_code, 0) << rendered.output;
    // Faster scrapes and rule evaluations than the config's 15 s, for short jobs.
    const auto interval = std::to_string(kScrapeSeconds) + "s";
    auto text = cifar::testing::read_file(config);
    for (const std::string key : {"scrape_interval", "evaluation_interval"}) {
      text = std::regex_replace(text, std::regex("\n  " + key + ": [^\n]*"),
                                "\n  " + key + ": " + interval);
    }
    text = std::regex_replace(text, std::regex("\n  scrape_timeout: [^\n]*"),
                              "\n  scrape_timeout: 4s");
    std::ofstream(config) << text;
    port_ = cifar::testing::free_port();
    prometheus_ = std::make_unique<cifar::testing::ChildProcess>(
        std::vector<std::string>{(bin / "prometheus").string(), "--config.file=" + config.string(),
                                 "--storage.tsdb.path=" + (volumes_ / "tsdb").string(),
                                 "--web.listen-address=127.0.0.1:" + std::to_string(port_)},
        volumes_ / "prometheus.log");
    ASSERT_TRUE(wait_for([&] { return !get("/-/ready").empty(); }, seconds(60)))
        << cifar::testing::read_file(volumes_ / "prometheus.log");
  }

  std::string get(const std::string& path) {
    return cifar::testing::http_get("http://127.0.0.1:" + std::to_string(port_) + path);
  }
  json api(const std::string& path) {
    const auto body = get(path);
    if (body.empty()) return json::object();
    return json::parse(body);
  }
  // A range query over the test's window: a job's series end with its pods, so an instant query
  // after it finished would find them stale.
  json range_query(const std::string& expr) {
    const auto now =
        std::chrono::duration_cast<seconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    return api("/api/v1/query_range?query=" + url_encoded(expr) +
               "&start=" + std::to_string(started_) + "&end=" + std::to_string(now) + "&step=5");
  }
  std::string substituted(std::string expr, const std::string& job) {
    expr = std::regex_replace(expr, std::regex(R"(\$\{?namespace\}?)"), ns_);
    expr = std::regex_replace(expr, std::regex(R"(\$\{?job\}?)"), job);
    return std::regex_replace(expr, std::regex(R"(\$\{?__rate_interval\}?)"), kRateInterval);
  }

  void TearDown() override {
    if (HasFailure() && prometheus_) {
      std::cerr << "---- prometheus targets:\n" << get("/api/v1/targets").substr(0, 4000) << "\n";
    }
    prometheus_.reset();
    Cluster::TearDown();
  }

  int port_ = 0;
  long long started_ =
      std::chrono::duration_cast<seconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  std::unique_ptr<cifar::testing::ChildProcess> prometheus_;
};

TEST_F(Monitoring, PrometheusScrapesTheJobsAndEveryDashboardPanelHasData) {
  start_prometheus();
  data_and_checkpoint_volumes();
  submit("ps", "  strategy: {type: ParameterServer, parameterServer: {mode: sync}}\n",
         "    PS: {replicas: 1}\n    Master: {replicas: 1}\n    Worker: {replicas: 1}\n"
         "    Evaluator: {replicas: 1}\n",
         "", "cifar10", 3);
  submit("ar", "  strategy: {type: AllReduce, allReduce: {backend: gloo}}\n",
         "    Worker: {replicas: 2}\n", "", "cifar10", 2);
  ASSERT_TRUE(wait_for_state("ps", "Succeeded", seconds(420))) << state("ps");
  ASSERT_TRUE(wait_for_state("ar", "Succeeded", seconds(300))) << state("ar");
  // One more scrape and rule evaluation after the end.
  std::this_thread::sleep_for(seconds(2 * kScrapeSeconds));

  // The dashboard's variables: its namespace and both jobs are there to pick.
  const auto namespaces = api("/api/v1/label/namespace/values?match[]=cifar_steps_total");
  EXPECT_NE(namespaces.dump().find("\"" + ns_ + "\""), std::string::npos) << namespaces.dump();
  const auto jobs = api("/api/v1/label/cifartrain_job/values?match[]=" +
                        url_encoded("cifar_steps_total{namespace=\"" + ns_ + "\"}"));
  for (const std::string job : {"ps", "ar"}) {
    EXPECT_NE(jobs.dump().find("\"" + job + "\""), std::string::npos) << jobs.dump();
  }

  // Every panel returns data for the job it is about (a PS panel for the PS job, an all-reduce
  // panel for the all-reduce job; most panels for both).
  std::vector<Panel> panels;
  collect_panels(json::parse(cifar::testing::read_file(kSource / "deploy/grafana/cifartrain.json"))
                     .value("panels", json::array()),
                 panels);
  ASSERT_GT(panels.size(), 10U);
  for (const auto& panel : panels) {
    ASSERT_FALSE(panel.queries.empty()) << panel.title << ": no query";
    std::vector<std::string> with_data;
    for (const std::string job : {"ps", "ar"}) {
      bool all = true;
      for (const auto& query : panel.queries) {
        const auto result = range_query(substituted(query, job));
        all = all && result.value("status", "") == "success" && has_a_number(result);
      }
      if (all) with_data.push_back(job);
    }
    EXPECT_FALSE(with_data.empty())
        << "panel '" << panel.title
        << "' has no data: " << substituted(panel.queries.front(), "ps");
    std::cout << "panel '" << panel.title << "': data for "
              << (with_data.empty()
                      ? "none"
                      : with_data.front() + (with_data.size() > 1 ? ", " + with_data[1] : ""))
              << "\n";
  }

  // The PS job's curves as its panels would plot them, for docs/monitoring/plot_panels.py.
  json curves;
  for (const auto& panel : panels) {
    for (const std::string title : {"Job step", "Training loss", "Accuracy", "Images per second"}) {
      if (panel.title != title) continue;
      for (size_t i = 0; i < panel.queries.size(); ++i) {
        curves[title].push_back(
            {{"legend", panel.legends[i]},
             {"result", range_query(substituted(panel.queries[i], "ps"))["data"]["result"]}});
      }
    }
  }
  std::ofstream(e2e_dir() / "dashboard-ps-job.json") << curves.dump();

  // Every alert rule evaluated on the real series without an error.
  const auto rules = api("/api/v1/rules");
  int evaluated = 0;
  for (const auto& group : rules["data"]["groups"]) {
    for (const auto& rule : group["rules"]) {
      EXPECT_EQ(rule.value("health", ""), "ok")
          << rule.value("name", "") << ": " << rule.value("lastError", "");
      ++evaluated;
    }
  }
  EXPECT_GT(evaluated, 5) << rules.dump();
}

}  // namespace
}  // namespace cifar::e2e
