// Embedding Kiln: build an RMSNorm kernel with the DSL, compile it, run it on this program's own
// arrays, and compare with a plain loop; then run a library kernel (attention) the same way and
// show that a second thread count gives the same bits. Exit 0 when everything agrees.
#include <kiln/kiln.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

namespace {

using namespace kiln::dsl;

// y[r, c] = x[r, c] / sqrt(mean_c(x[r, :]^2) + eps) * w[c], four rows per program.
BuildResult buildRmsNorm(int64_t rows, int64_t cols, double eps) {
  KernelBuilder kb("my_rmsnorm");
  View x = kb.view("x", {rows, cols});
  View w = kb.view("w", {cols});
  View y = kb.view("y", {rows, cols});
  const int64_t block = 4;
  const std::vector<Access> rc = {{"r", block}, {"c", cols}};
  kb.parallel({{"p", (rows + block - 1) / block}}, [&](Idx p) {
    Idx r0 = p * block;
    Tile t = load(x, {r0, 0}, rc);
    Tile inv = rsqrt(reduceSum(t * t, {"c"}, 0.0) / static_cast<double>(cols) + eps);
    store(t * inv * load(w, {0}, {{"c", cols}}), y, {r0, 0}, rc);
  });
  return kb.finish();
}

// A deterministic fill in [-1, 1).
void fill(std::vector<float>& v, uint32_t seed) {
  for (float& f : v) {
    seed = seed * 1664525u + 1013904223u;
    f = static_cast<float>(seed >> 8) / 8388608.0f - 1.0f;
  }
}

int fail(const std::string& what) {
  std::fprintf(stderr, "embed: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main() {
  std::printf("Kiln %s\n", kiln::version());

  // 1. A DSL kernel on our own arrays, checked against our own loop.
  const int64_t rows = 37, cols = 200;
  const double eps = 1e-5;
  kiln::Result<kiln::Kernel> norm = kiln::Kernel::compile(buildRmsNorm(rows, cols, eps));
  if (!norm) return fail(norm.message());
  std::vector<float> x(rows * cols), w(cols), y(rows * cols, 0.0f);
  fill(x, 1);
  fill(w, 2);
  if (kiln::Status s = norm->launch({kiln::Arg::input(x), kiln::Arg::input(w), kiln::Arg::output(y)}); !s)
    return fail(s.message());
  double worst = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t c = 0; c < cols; ++c) ss += double(x[r * cols + c]) * x[r * cols + c];
    const double inv = 1.0 / std::sqrt(ss / cols + eps);
    for (int64_t c = 0; c < cols; ++c) {
      const double want = x[r * cols + c] * inv * w[c];
      worst = std::max(worst, std::abs(want - y[r * cols + c]) / (std::abs(want) + 1e-3));
    }
  }
  std::printf("my_rmsnorm %lldx%lld: worst relative error %.3g against a double loop\n", (long long)rows,
              (long long)cols, worst);
  if (worst > 1e-5) return fail("my_rmsnorm disagrees with the loop");

  // 2. Errors are values that name the parameter.
  std::vector<float> small(10);
  kiln::Status bad = norm->launch({kiln::Arg::input(small), kiln::Arg::input(w), kiln::Arg::output(y)});
  if (bad || bad.message().find("%x") == std::string::npos) return fail("a short buffer for %x was not refused");
  std::printf("refused as expected: %s\n", bad.message().c_str());

  // 3. A library kernel, reused from several threads at once, and at two thread counts: same bits.
  const char* shape = "1,8,2,1,300,64,64";
  kiln::Result<kiln::Kernel> one = kiln::Kernel::library("attention", shape, {{"mask", "none"}});
  kiln::Result<kiln::Kernel> two =
      kiln::Kernel::library("attention", shape, {{"mask", "none"}}, kiln::Options().set("threads", "2"));
  if (!one) return fail(one.message());
  if (!two) return fail(two.message());
  std::vector<std::vector<float>> in;
  for (const kiln::Param& p : one->params())
    if (!p.written) in.emplace_back(p.elements()), fill(in.back(), static_cast<uint32_t>(in.size()) * 7u);
  const kiln::Param* o = one->param("o");
  if (!o) return fail("attention has no parameter %o");
  std::vector<float> a(o->elements()), b(o->elements()), c(o->elements());
  auto args = [&](std::vector<float>& out) {  // inputs in parameter order, the output in its place
    std::vector<kiln::Arg> v;
    size_t next = 0;
    for (const kiln::Param& p : one->params())
      v.push_back(p.written ? kiln::Arg::output(out) : kiln::Arg::input(in[next++]));
    return v;
  };
  kiln::Status sa, sc;
  std::thread t1([&] { sa = one->launch(args(a)); });
  std::thread t2([&] { sc = one->launch(args(c)); });
  t1.join();
  t2.join();
  kiln::Status sb = two->launch(args(b));
  for (const kiln::Status* s : {&sa, &sb, &sc})
    if (!*s) return fail(s->message());
  if (std::memcmp(a.data(), b.data(), a.size() * 4) != 0 || std::memcmp(a.data(), c.data(), a.size() * 4) != 0)
    return fail("attention: the bits differ between launches");
  std::printf("attention %s: identical bits at 1 and 2 threads and from two concurrent launches\n", shape);
  std::printf("embed: ok\n");
  return 0;
}
