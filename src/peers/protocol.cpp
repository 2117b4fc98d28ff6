// Calibration, budget, interleaved visits and paired statistics; see protocol.h.
#include "peers/protocol.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

namespace kiln::peers {

ProtocolOptions ProtocolOptions::quick() {
  ProtocolOptions o;
  o.warmup_s = 0.005;
  o.target_s = 0.002;
  o.samples = 3;
  o.visits = 3;
  o.min_samples = 3;
  o.min_visits = 3;
  o.budget_s = 5.0;
  return o;
}

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

namespace {

using Clock = std::chrono::steady_clock;

// Calls for about `seconds`, at least once (one sample of `calls` calls).
std::optional<std::string> warm(Impl& impl, double call_s, double seconds) {
  std::vector<double> t;
  const int calls = std::max(1, static_cast<int>(std::ceil(seconds / std::max(call_s, 1e-9))));
  return impl.time(1, calls, t, false);
}

}  // namespace

ProtocolRun runProtocol(const std::vector<Impl*>& impls, int baseline, const ProtocolOptions& o,
                        std::vector<Measured>& out, const std::function<void(const std::string&)>& progress) {
  const auto start = Clock::now();
  const size_t n = impls.size();
  out.assign(n, Measured{});
  std::vector<double> t;
  const bool cold = o.cold_caches;
  double evict_s = 0.0;
  std::size_t evict_bytes = 0;
  if (cold) {
    evictCaches();  // the first call allocates and writes the buffer
    const auto t0 = Clock::now();
    evict_bytes = evictCaches();
    evict_s = std::chrono::duration<double>(Clock::now() - t0).count();
  }

  // 1. calibration
  for (size_t i = 0; i < n; ++i) {
    Measured& m = out[i];
    double first = 0.0;
    if (auto e = impls[i]->time(1, 1, t, cold)) {
      m.error = *e;
      continue;
    }
    first = t[0];
    if (!cold && first < o.warmup_s) {
      if (auto e = warm(*impls[i], first, o.warmup_s)) {
        m.error = *e;
        continue;
      }
    }
    const int more = first > 1.0 ? 1 : 3;
    if (auto e = impls[i]->time(1, more, t, cold)) {
      m.error = *e;
      continue;
    }
    m.call_s = *std::min_element(t.begin(), t.end());
    m.reps = cold ? 1 : std::max(1, static_cast<int>(std::lround(o.target_s / std::max(m.call_s, 1e-9))));
    m.samples = o.samples;
    m.timed = true;
  }

  // 2. budget
  auto warmOf = [&](const Measured& m) {
    return cold || m.call_s > 10 * o.warmup_s ? 0.0 : std::max(o.warmup_s, m.call_s);
  };
  auto visitOf = [&](const Measured& m) {
    return m.timed ? o.gap_s + warmOf(m) + m.samples * m.reps * (m.call_s + evict_s) : 0.0;
  };
  int visits = o.visits;
  auto total = [&] {
    double s = 0.0;
    for (const Measured& m : out) s += visitOf(m);
    return s * visits;
  };
  while (total() > o.budget_s) {
    Measured* longest = nullptr;
    for (Measured& m : out)
      if (m.timed && m.samples > o.min_samples && (!longest || visitOf(m) > visitOf(*longest))) longest = &m;
    if (longest)
      --longest->samples;
    else if (visits > o.min_visits)
      --visits;
    else
      break;
  }
  ProtocolRun run;
  run.visits = visits;
  run.evict_s = evict_s;
  run.evict_bytes = evict_bytes;
  run.estimated_s = total();

  // 3. visits, rotating order
  for (size_t i = 0; i < n; ++i) out[i].visits.assign(visits, {});
  for (int v = 0; v < visits; ++v) {
    for (size_t k = 0; k < n; ++k) {
      const size_t i = (k + v) % n;
      Measured& m = out[i];
      if (!m.timed) continue;
      std::optional<std::string> e;
      if (o.gap_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(o.gap_s));
      if (warmOf(m) > 0) e = warm(*impls[i], m.call_s, o.warmup_s);
      if (!e) e = impls[i]->time(m.reps, m.samples, m.visits[v], cold);
      if (e) {
        m.timed = false;
        m.error = *e;
      }
    }
    if (progress) progress("round " + std::to_string(v + 1) + "/" + std::to_string(visits));
  }

  // 4. statistics
  for (Measured& m : out) {
    if (!m.timed) continue;
    std::vector<double> all;
    for (const std::vector<double>& s : m.visits) {
      m.visit_medians.push_back(median(s));
      all.insert(all.end(), s.begin(), s.end());
    }
    m.median_s = median(m.visit_medians);
    m.min_s = *std::min_element(all.begin(), all.end());
    m.max_s = *std::max_element(all.begin(), all.end());
  }
  if (baseline >= 0 && out[baseline].timed)
    for (Measured& m : out) {
      if (!m.timed) continue;
      for (int v = 0; v < visits; ++v) m.ratios.push_back(m.visit_medians[v] / out[baseline].visit_medians[v]);
      m.ratio = median(m.ratios);
      m.ratio_min = *std::min_element(m.ratios.begin(), m.ratios.end());
      m.ratio_max = *std::max_element(m.ratios.begin(), m.ratios.end());
      m.has_ratio = true;
    }
  run.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  return run;
}

}  // namespace kiln::peers
