#include "bench/bench.h"

#include "bench/archive.h"
#include "bench/capture.h"
#include "bench/environment.h"
#include "bench/render.h"

namespace kiln::bench {

std::optional<std::string> runBench(const Experiment& e, const std::string& out_dir, const BenchOptions& options,
                                    BenchOutcome& out) {
  if (auto err = validate(e)) return err;
  if (auto err = checkCpu(options.replay.cpu)) return err;
  std::unique_ptr<Archive> archive;
  if (auto err = Archive::create(out_dir, archive)) return err;
  nlohmann::ordered_json env = environmentBefore();
  if (auto err = archive->write("plan.json", jsonText(toJson(e)))) return err;

  // Phase 1: capture.
  std::vector<std::array<CaptureRecord, 2>> captures(e.cases.size());
  std::vector<std::array<CodeShape, 2>> shapes(e.cases.size());
  const int64_t planned = plannedTotals(e).captures;
  int64_t done = 0;
  for (size_t ci = 0; ci < e.cases.size(); ++ci)
    for (int a = 0; a < 2; ++a) {
      if (auto err = capture(e, ci, a, *archive, captures[ci][a])) return err;
      std::string report;
      if (!archive->read(captureDir(e.cases[ci], e.arms[a]) + "/report.json", report))
        shapes[ci][a] = codeShape(nlohmann::json::parse(report, nullptr, false));
      if (options.capture_progress) options.capture_progress(++done, planned);
    }

  // Phase 2: replay.
  Replay rep;
  if (auto err = replay(e, *archive, captures, options.replay, rep)) return err;

  out.results = computeResults(e, captures, rep);
  out.table = renderTable(e, out.results, shapes);
  environmentAfter(env, rep.cpu);
  for (auto [name, text] : {std::pair<std::string, std::string>{"samples.json", jsonText(toJson(rep, e))},
                            {"results.json", jsonText(toJson(out.results))},
                            {"table.md", out.table},
                            {"chart.svg", renderChart(e, out.results)},
                            {"environment.json", jsonText(env)}})
    if (auto err = archive->write(name, text)) return err;
  std::string sums;
  if (auto err = sumsText(*archive, sums)) return err;
  return archive->write(kSumsFile, sums);
}

}  // namespace kiln::bench
