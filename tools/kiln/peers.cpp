// `kiln peers`: Kiln against the libraries and hand-written code a user would pick instead,
// on the same attention workloads in one process, against the machine's measured limits.
// Prints one table per shape; writes peers.json and peers.svg (see docs/peers.md).
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "command.h"
#include "peers/peers.h"
#include "peers/remote.h"

namespace kiln::cli {
namespace {

// The command line as typed (for the report), from /proc/self/cmdline.
std::string commandLine() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()), out, arg;
  std::istringstream args(all);
  while (std::getline(args, arg, '\0')) {
    const bool plain = !arg.empty() && arg.find_first_not_of(
                                           "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=.,/:+") ==
                                           std::string::npos;
    out += (out.empty() ? "" : " ") + (plain ? arg : "'" + arg + "'");
  }
  return out;
}

bool writeFile(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  f.close();
  if (!f) std::cerr << "kiln peers: error: cannot write " << path << '\n';
  return static_cast<bool>(f);
}

}  // namespace

Command addPeers(CLI::App& parent) {
  CLI::App* app = parent.add_subcommand("peers",
                                        "Time Kiln's attention (or GEMM) against oneDNN, OpenBLAS, hand-written and "
                                        "plain code, and the machine's limits");
  struct Args {
    peers::PeersOptions o;
    std::vector<std::string> impls;
    std::string mask = "none";
    std::string kernel = "attention";
    bool quick = false;
    double budget = 0.0;
    std::string out_dir = ".", json, svg, markdown;
    std::string serve;
    std::string isa = "native";
    std::string kv_dtype = "f32";
    std::string b_dtype = "f32";
    std::string caches = "warm";
  };
  auto a = std::make_shared<Args>();
  std::string impl_names;
  for (const std::string& n : peers::implNames()) impl_names += (impl_names.empty() ? "" : ", ") + n;
  app->add_option("--kernel", a->kernel,
                  "attention (default) or gemm: C = A.B, Kiln's library GEMM beside oneDNN matmul, OpenBLAS sgemm and "
                  "plain loops")
      ->check(CLI::IsMember({"attention", "gemm"}));
  app->add_option("--shape", a->o.shapes,
                  "Add a shape (repeatable) to the default ones: attention B,Hq,Hkv,Q,K,D,Dv (six defaults); gemm "
                  "M,N,K (defaults 512,512,512 1,4096,4096 64,2048,256)");
  app->add_flag("--only-shapes", a->o.only_shapes, "Measure only the --shape shapes");
  app->add_option("--mask", a->mask, "Attention mask (default none)")->check(CLI::IsMember({"none", "causal"}));
  app->add_option("--threads", a->o.threads, "Threads for every implementation (default 1)")->check(CLI::Range(1, 256));
  app->add_option("--impl", a->impls, "Implementations to run, comma-separated (default all): " + impl_names)
      ->delimiter(',');
  app->add_flag("--runtime-lengths", a->o.runtime_lengths,
                "Add kiln-lengths: the attention over a dense KV cache (lengths at launch, here all K) beside kiln "
                "and kiln-untuned, paired in the same rounds (attention only)");
  app->add_option("--kv-dtype", a->kv_dtype,
                  "Attention's K and V stored as f32 (default), f16 or bf16: Kiln's kernel reads them as such "
                  "(kiln-f32 beside it reads the same values as f32), oneDNN runs its 16-bit pipeline; the peers "
                  "that read f32 K/V only are left out")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}));
  app->add_option(
         "--b-dtype", a->b_dtype,
         "GEMM's B (the weights) stored as f32 (default), f16 or bf16, A and C f32: Kiln's GEMM reads B as "
         "such, oneDNN runs its 16-bit matmul (A rounded to B's type); the peers that read f32 B only are "
         "left out; with bf16, kiln-bf16dot: Kiln's GEMM in the bf16 dot order, A and B bf16, on AMX tiles, and "
         "kiln-bf16pairs: in the bf16 pairs order, on VDPBF16PS")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}));
  app->add_option("--caches", a->caches,
                  "warm (default): calls follow each other, so a shape whose inputs fit in the caches is timed from "
                  "them; cold: before every timed call the caches are emptied (a buffer of 4x the last-level cache "
                  "read, untimed), as a model's decode step finds a layer's KV cache in DRAM after the other layers")
      ->check(CLI::IsMember({"warm", "cold"}));
  app->add_flag("--quick", a->quick, "Short protocol: warmup 5 ms, sample target 2 ms, 3 samples, 3 rounds");
  app->add_option("--budget", a->budget, "Seconds of timing per shape before samples and rounds are cut (default 45)")
      ->check(CLI::PositiveNumber);
  app->add_option("--seed", a->o.seed, "Seed of the deterministic inputs (as for kiln run)")->check(seedValidator());
  app->add_option("--block", a->o.impl.block,
                  "Kiln default: queries x keys per step, BQxBK (default: the library's choice per shape)");
  app->add_option("--split", a->o.impl.split,
                  "Kiln default: split KV into N chunks, auto or off (default: the library's choice per shape)")
      ->check([](const std::string& v) {
        if (v == "auto" || v == "off") return std::string();
        for (char c : v)
          if (c < '0' || c > '9') return "'" + v + "' is not N, auto or off";
        return v.empty() || v.size() > 4 || std::stoi(v) < 1 ? "'" + v + "' is not N (1..4096), auto or off"
                                                             : std::string();
      });
  app->add_option("--set", a->o.impl.knob_sets,
                  "Add kiln-set: kiln with this knob, NAME=VALUE (repeatable; e.g. tune_cpu=host), over its default or "
                  "tuned knobs, paired with kiln in the same rounds on the same buffers (threads: --threads)");
  app->add_option("--isa", a->isa,
                  "Instruction set of every implementation: native (this CPU's), avx2 (Kiln isa=avx2, oneDNN "
                  "ONEDNN_MAX_CPU_ISA=AVX2, OpenBLAS core Haswell, the AVX2 hand-written and plain code; on an AVX-512 "
                  "machine kiln peers restarts itself with that environment) or avx512")
      ->check(CLI::IsMember({"native", "avx2", "avx512"}));
  app->add_option("--native-isa", a->o.impl.native_isa, "Hand-written kernel: auto, avx512 or avx2 (default auto)")
      ->check(CLI::IsMember({"auto", "avx512", "avx2"}));
  app->add_option("--out", a->out_dir, "Directory for peers.json and peers.svg (default: the current directory)");
  app->add_option("--json", a->json, "Write the JSON record here instead of OUT/peers.json");
  app->add_option("--svg", a->svg, "Write the chart here instead of OUT/peers.svg");
  app->add_option("--markdown", a->markdown, "Also write the README's \"How fast is it?\" section here");
  // The child side of a peer that runs in its own process (src/peers/remote.h).
  app->add_option("--serve", a->serve)->group("");
  app->footer(
      "See docs/peers.md. Exit codes: 0 every implementation correct on every shape, 1 one was wrong or failed (or "
      "bad input).");

  return {app, [a] {
            peers::PeersOptions& o = a->o;
            o.causal = a->mask == "causal";
            o.workload = a->kernel == "gemm" ? peers::Workload::Gemm : peers::Workload::Attention;
            o.impls = a->impls;
            dsl::floatElemNamed(a->kv_dtype, o.kv_elem);  // one of them (checked by CLI11)
            dsl::floatElemNamed(a->b_dtype, o.b_elem);
            if (a->quick) {
              o.protocol = peers::ProtocolOptions::quick();
              o.protocol_name = "quick";
            }
            if (a->budget > 0) o.protocol.budget_s = a->budget;
            o.protocol.cold_caches = a->caches == "cold";
            o.command = commandLine();
            std::vector<peers::ShapeSpec> shapes;
            if (auto e = peers::checkOptions(o, shapes)) {
              std::cerr << "kiln peers: error: " << *e << '\n';
              return 1;
            }
            if (a->serve.empty()) {
              if (auto e = peers::useIsa(a->isa, o)) {
                std::cerr << "kiln peers: error: " << *e << '\n';
                return 1;
              }
            }
            if (!a->serve.empty()) {
              peers::ServeRequest r{a->serve, shapes.back().attention, o.causal, o.seed, o.threads};
              return peers::servePeer(r);
            }
            peers::PeersResult result;
            if (auto e = peers::runPeers(o, result, std::cout, std::cerr)) {
              std::cerr << "kiln peers: error: " << *e << '\n';
              return 1;
            }
            std::error_code ec;
            std::filesystem::create_directories(a->out_dir, ec);
            if (!std::filesystem::is_directory(a->out_dir)) {
              std::cerr << "kiln peers: error: --out " << a->out_dir << " is not a directory\n";
              return 1;
            }
            const std::string json = a->json.empty() ? a->out_dir + "/peers.json" : a->json;
            const std::string svg = a->svg.empty() ? a->out_dir + "/peers.svg" : a->svg;
            bool ok = writeFile(json, peers::toJson(result).dump(2) + "\n") && writeFile(svg, peers::toSvg(result));
            if (!a->markdown.empty()) ok = writeFile(a->markdown, peers::toMarkdown(result, svg)) && ok;
            if (ok)
              std::cout << "\nwrote " << json << " and " << svg << (a->markdown.empty() ? "" : " and " + a->markdown)
                        << '\n';
            for (const peers::ShapeResult& s : result.shapes)
              for (const peers::RowResult& r : s.rows) ok = ok && (r.status == "ok" || r.status == "unavailable");
            return ok ? 0 : 1;
          }};
}

}  // namespace kiln::cli
