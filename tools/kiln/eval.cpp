// `kiln eval FILE`: run a kernel in the interpreter (the oracle) on deterministic inputs and
// describe every output view as JSON (shape, SHA-256 of its float32 bytes, min/max/mean).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "command.h"
#include "host/data.h"
#include "interp/interp.h"
#include "npy_options.h"

namespace kiln::cli {
namespace {

// Inputs and outputs are held in memory (floats, plus doubles in f64 mode); refuse kernels
// whose views together exceed this many elements rather than exhaust the machine.
constexpr int64_t kMaxViewElements = int64_t{1} << 28;

struct EvalArgs {
  std::string file;
  uint64_t seed = 0;
  std::string mode = "f64";
  std::vector<std::string> args;  // name=value
  int partitions = 4;
  NpyOptions npy;
};

std::optional<std::string> checkSize(const ir::Kernel& kernel) {
  int64_t total = 0;
  for (const ir::Value* p : kernel.params) {
    if (!p->type.isView()) continue;
    int64_t n = 1;
    for (int64_t extent : p->type.shape()) {
      if (extent != 0 && n > kMaxViewElements / extent) return "view %" + p->name + " is too large to evaluate";
      n *= extent;
    }
    total += n;
    if (total > kMaxViewElements) {
      return "the kernel's views hold more than " + std::to_string(kMaxViewElements) + " elements in total";
    }
  }
  return std::nullopt;
}

// SHA-256 of the values as float32 little-endian bytes, whatever the host's byte order.
std::string sha256OfFloats(const std::vector<float>& values) {
  if constexpr (std::endian::native == std::endian::little) {
    return host::sha256Hex(values.data(), values.size() * sizeof(float));
  } else {
    std::vector<unsigned char> bytes;
    bytes.reserve(values.size() * 4);
    for (float f : values) {
      const auto u = std::bit_cast<uint32_t>(f);
      for (int b = 0; b < 4; ++b) bytes.push_back(static_cast<unsigned char>(u >> (8 * b)));
    }
    return host::sha256Hex(bytes.data(), bytes.size());
  }
}

// A statistic for the JSON: a number, or null when it is NaN or infinite.
nlohmann::ordered_json finiteOrNull(double v) {
  if (!std::isfinite(v)) return nullptr;
  return v;
}

int runEval(const EvalArgs& a) {
  auto fail = [](const std::string& message) {
    std::cerr << "kiln eval: error: " << message << '\n';
    return 1;
  };
  std::unique_ptr<ir::Kernel> kernel = loadKernel(a.file);
  if (!kernel) return 1;

  std::map<std::string, std::string> overrides;
  for (const std::string& arg : a.args) {
    size_t eq = arg.find('=');
    std::string name = arg.substr(0, eq);
    if (name.size() > 1 && name.front() == '%') name.erase(0, 1);  // "%n=3" and "n=3" name the same parameter
    if (!overrides.emplace(name, arg.substr(eq + 1)).second) return fail("--arg " + name + " is given twice");
  }
  if (auto err = checkSize(*kernel)) return fail(*err);

  std::map<std::string, std::vector<float>> views;
  std::map<std::string, std::vector<int64_t>> ints;
  if (!a.npy.load(*kernel, "eval", views, ints, overrides)) return 1;
  std::vector<host::ParamData> params;
  if (auto err = host::makeInputs(*kernel, a.seed, overrides, params)) return fail(*err);
  for (const ir::Value* p : kernel->params) {  // shapes checked by load()
    if (auto it = views.find(p->name); it != views.end()) params[p->index].data = it->second;
    if (auto it = ints.find(p->name); it != ints.end()) params[p->index].ints = it->second;
  }

  interp::Options options;
  options.mode = a.mode == "strict-f32" ? interp::Mode::StrictF32 : interp::Mode::F64;
  options.reduction_partitions = a.partitions;
  if (auto err = interp::evaluate(*kernel, params, options)) return fail(*err);
  if (!a.npy.store(*kernel, "eval", params)) return 1;

  // Hand-laid JSON: one key per line, one output per line, each value dumped by nlohmann.
  // Stable for a given kernel, seed and mode, and readable in `make run`.
  std::string out = "{\n";
  out += "  \"kernel\": " + nlohmann::json(kernel->name).dump() + ",\n";
  out += "  \"mode\": " + nlohmann::json(a.mode).dump() + ",\n";
  out += "  \"seed\": " + nlohmann::json(a.seed).dump() + ",\n";
  out += "  \"outputs\": [";
  const std::vector<ir::Value*> outputs = kernel->outputs();
  for (size_t i = 0; i < outputs.size(); ++i) {
    const ir::Value* v = outputs[i];
    nlohmann::ordered_json o;
    o["name"] = v->name;
    o["shape"] = v->type.shape();
    if (ir::isIntegerStorage(v->type.elem)) {
      // An integer view: the digest of its elements as int32 or int64 (host::integerBytes; little-endian on x86).
      const std::vector<int64_t>& data = params[v->index].ints;
      const std::string bytes = host::integerBytes(data, v->type.elem == ir::Elem::I32);
      o["sha256"] = host::sha256Hex(bytes.data(), bytes.size());
      o["min"] = data.empty() ? nlohmann::ordered_json(nullptr)
                              : nlohmann::ordered_json(*std::min_element(data.begin(), data.end()));
      o["max"] = data.empty() ? nlohmann::ordered_json(nullptr)
                              : nlohmann::ordered_json(*std::max_element(data.begin(), data.end()));
      out += (i == 0 ? "\n    " : ",\n    ") + o.dump();
      continue;
    }
    const std::vector<float>& data = params[v->index].data;
    const host::Stats s = host::stats(data);
    o["sha256"] = sha256OfFloats(data);
    o["min"] = finiteOrNull(s.min);
    o["max"] = finiteOrNull(s.max);
    o["mean"] = finiteOrNull(s.mean);
    out += (i == 0 ? "\n    " : ",\n    ") + o.dump();
  }
  out += outputs.empty() ? "]\n}\n" : "\n  ]\n}\n";
  std::cout << out;
  return 0;
}

}  // namespace

Command addEval(CLI::App& parent) {
  CLI::App* app = parent.add_subcommand("eval", "Run a kernel in the interpreter on generated inputs; print JSON");
  auto a = std::make_shared<EvalArgs>();
  app->add_option("FILE", a->file, ".tile file (\"-\" reads stdin)")->required();
  app->add_option("--seed", a->seed, "seed of the input generator, 0 .. 2^64-1 (default 0)")->check(seedValidator());
  app->add_option("--mode", a->mode, "f64 (double precision oracle, default) or strict-f32 (IEEE float, IR order)")
      ->check(CLI::IsMember({"f64", "strict-f32"}));
  app->add_option("--arg", a->args, "set a scalar parameter: NAME=VALUE (repeatable; default i64 0, f32 drawn)")
      ->allow_extra_args(false)
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            size_t eq = s.find('=');
            return eq == std::string::npos || eq == 0 ? "expected NAME=VALUE, got '" + s + "'" : "";
          },
          "NAME=VALUE"));
  a->npy.add(app);
  app->add_option("--partitions", a->partitions,
                  "reduction_partitions for 'unordered_tree' reductions without a count (default 4)")
      ->check(CLI::Range(1, 16));
  app->footer(
      "Prints {\"kernel\", \"mode\", \"seed\", \"outputs\": [{\"name\", \"shape\", \"sha256\", \"min\", \"max\",\n"
      "\"mean\"}]} for every view the kernel stores to. sha256 is over the output's float32\n"
      "little-endian bytes (f64 results rounded to float); a NaN or infinite statistic is null.\n"
      "Exit 1 with a message on stderr on any error. See docs/cli.md.");
  return {app, [a] { return runEval(*a); }};
}

}  // namespace kiln::cli
