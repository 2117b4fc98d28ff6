#include "bench/samples.h"

namespace kiln::bench {

bool Visit::complete(int planned_samples) const {
  if (static_cast<int>(samples.size()) != planned_samples) return false;
  for (const Validation& v : validations)
    if (!v.ok) return false;
  return true;
}

nlohmann::ordered_json toJson(const Replay& r, const Experiment& e) {
  nlohmann::ordered_json j;
  j["format"] = "kiln-bench-samples/1";
  j["unit"] = "us per launch = batch_ns / 1000 / reps";
  j["cpu"] = r.cpu;
  j["compilations_during_replay"] = r.compilations;
  nlohmann::ordered_json cases = nlohmann::ordered_json::array();
  for (const CaseReplay& c : r.cases) {
    nlohmann::ordered_json visits = nlohmann::ordered_json::array();
    for (const Visit& v : c.visits) {
      nlohmann::ordered_json samples = nlohmann::ordered_json::array();
      for (const Sample& s : v.samples) samples.push_back({{"batch_ns", s.batch_ns}, {"reps", s.reps}, {"us", s.us}});
      nlohmann::ordered_json validations = nlohmann::ordered_json::array();
      for (const Validation& val : v.validations)
        validations.push_back({{"after", val.after}, {"ok", val.ok}, {"reason", val.reason}});
      visits.push_back({{"cycle", v.cycle},
                        {"position", v.position},
                        {"arm", e.arms[v.arm].name},
                        {"warmup_launches", v.warmup_launches},
                        {"warmup_ns", v.warmup_ns},
                        {"calibration_reps", v.calibration_reps},
                        {"calibration_ns", v.calibration_ns},
                        {"reps", v.reps},
                        {"samples", samples},
                        {"validations", validations}});
    }
    cases.push_back({{"case", c.id}, {"status", c.status}, {"reason", c.reason}, {"visits", visits}});
  }
  j["cases"] = cases;
  return j;
}

std::optional<std::string> fromJson(const nlohmann::json& j, const Experiment& e, Replay& out) {
  out = Replay{};
  try {
    if (j.at("format") != "kiln-bench-samples/1") return "samples.json: unknown format";
    out.cpu = j.at("cpu").get<int>();
    out.compilations = j.at("compilations_during_replay").get<int64_t>();
    for (const auto& c : j.at("cases")) {
      CaseReplay cr;
      cr.id = c.at("case").get<std::string>();
      cr.status = c.at("status").get<std::string>();
      cr.reason = c.at("reason").get<std::string>();
      for (const auto& v : c.at("visits")) {
        Visit vi;
        vi.cycle = v.at("cycle").get<int>();
        vi.position = v.at("position").get<int>();
        const std::string arm = v.at("arm").get<std::string>();
        if (arm == e.arms[0].name)
          vi.arm = 0;
        else if (arm == e.arms[1].name)
          vi.arm = 1;
        else
          return "samples.json: case '" + cr.id + "': unknown arm '" + arm + "'";
        vi.warmup_launches = v.at("warmup_launches").get<int64_t>();
        vi.warmup_ns = v.at("warmup_ns").get<int64_t>();
        vi.calibration_reps = v.at("calibration_reps").get<int64_t>();
        vi.calibration_ns = v.at("calibration_ns").get<int64_t>();
        vi.reps = v.at("reps").get<int64_t>();
        for (const auto& s : v.at("samples"))
          vi.samples.push_back(
              {s.at("batch_ns").get<int64_t>(), s.at("reps").get<int64_t>(), s.at("us").get<double>()});
        for (const auto& val : v.at("validations"))
          vi.validations.push_back(
              {val.at("after").get<std::string>(), val.at("ok").get<bool>(), val.at("reason").get<std::string>()});
        cr.visits.push_back(std::move(vi));
      }
      out.cases.push_back(std::move(cr));
    }
  } catch (const nlohmann::json::exception& ex) {
    return std::string("samples.json: ") + ex.what();
  }
  return std::nullopt;
}

}  // namespace kiln::bench
