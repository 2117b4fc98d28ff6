// chart.svg: one row per case, the paired B/A ratio as a dot on a log scale with its min–max as
// a bar, a dashed line at 1.0 (left of it: B faster). Coordinates are printed with two
// decimals, so the bytes depend only on the results.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "bench/render.h"

namespace kiln::bench {
namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// log2 from +, -, *, / only (no libm), so that the chart's bytes are the same on every
// machine: x = m * 2^e with m in [1, 2), ln m = 2 atanh((m - 1) / (m + 1)) by its series.
double log2Portable(double v) {
  int e = 0;
  const double m = std::frexp(v, &e) * 2.0;  // exact
  const double t = (m - 1.0) / (m + 1.0), t2 = t * t;
  double term = t, sum = 0.0;
  for (int k = 1; k < 60; k += 2) {
    sum += term / k;
    term *= t2;
  }
  return static_cast<double>(e - 1) + 2.0 * sum / 0.6931471805599453;
}

constexpr double kLabelW = 300, kPlotW = 420, kValueW = 200, kRowH = 30, kTop = 60, kBottom = 50;

}  // namespace

std::string renderChart(const Experiment& e, const Results& r) {
  // The scale: powers of two around every min and max, and 1.0.
  double lo = 1.0, hi = 1.0;
  for (const CaseResult& c : r.cases)
    if (c.ratio) {
      lo = std::min(lo, c.ratio->min);
      hi = std::max(hi, c.ratio->max);
    }
  const double lo2 = std::floor(log2Portable(lo) - 0.05), hi2 = std::ceil(log2Portable(hi) + 0.05);
  const double x0 = kLabelW, x1 = kLabelW + kPlotW;
  auto x = [&](double ratio) { return x0 + (log2Portable(ratio) - lo2) / (hi2 - lo2) * (x1 - x0); };
  const double width = kLabelW + kPlotW + kValueW;
  const double height = kTop + kRowH * static_cast<double>(r.cases.size()) + kBottom;
  const double plot_bottom = kTop + kRowH * static_cast<double>(r.cases.size());
  const std::string A = e.arms[0].name, B = e.arms[1].name;

  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" viewBox=\"0 0 {:.0f} {:.0f}\" "
      "font-family=\"sans-serif\" font-size=\"13\">\n",
      width, height, width, height);
  s += fmt::format("<rect width=\"{:.0f}\" height=\"{:.0f}\" fill=\"white\"/>\n", width, height);
  s += fmt::format("<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">{}: paired {}/{} per case</text>\n",
                   escape(e.name), escape(B), escape(A));
  s += fmt::format(
      "<text x=\"10\" y=\"42\" fill=\"#555\">dot: median of {} paired ratios; bar: their min–max (not a confidence "
      "interval); log scale; left of 1.0: {} faster</text>\n",
      e.protocol.cycles * 2, escape(B));
  // Grid: one line per power of two, the 1.0 line dashed and darker.
  for (double p = lo2; p <= hi2 + 1e-9; p += 1.0) {
    const double v = std::ldexp(1.0, static_cast<int>(p));
    const double gx = x(v);
    const bool one = std::abs(p) < 1e-9;
    s += fmt::format("<line x1=\"{:.2f}\" y1=\"{:.2f}\" x2=\"{:.2f}\" y2=\"{:.2f}\" stroke=\"{}\"{}/>\n", gx, kTop - 6,
                     gx, plot_bottom, one ? "#333" : "#ddd", one ? " stroke-dasharray=\"5,4\"" : "");
    s += fmt::format("<text x=\"{:.2f}\" y=\"{:.2f}\" text-anchor=\"middle\" fill=\"#555\">{:g}</text>\n", gx,
                     plot_bottom + 18, v);
  }
  s += fmt::format("<text x=\"{:.2f}\" y=\"{:.2f}\" text-anchor=\"middle\" fill=\"#555\">ratio {}/{}</text>\n",
                   (x0 + x1) / 2, plot_bottom + 38, escape(B), escape(A));
  for (size_t i = 0; i < r.cases.size() && i < e.cases.size(); ++i) {
    const CaseResult& c = r.cases[i];
    const Case& ec = e.cases[i];
    const double y = kTop + kRowH * (static_cast<double>(i) + 0.5);
    const std::string label = fmt::format("{} · P {} · R {}", ec.label, knobText(ec, e.arms[0], "full_packet"),
                                          knobText(ec, e.arms[0], "mma_output_block"));
    s += fmt::format("<text x=\"10\" y=\"{:.2f}\" dominant-baseline=\"middle\">{}</text>\n", y, escape(label));
    if (!c.ok || !c.ratio) {
      s += fmt::format("<text x=\"{:.2f}\" y=\"{:.2f}\" dominant-baseline=\"middle\" fill=\"#b00\">failed</text>\n",
                       x0 + 4, y);
      continue;
    }
    const std::string color = c.ratio->median <= 1.0 ? "#1a7f37" : "#b35900";
    s += fmt::format(
        "<line x1=\"{:.2f}\" y1=\"{:.2f}\" x2=\"{:.2f}\" y2=\"{:.2f}\" stroke=\"{}\" stroke-width=\"3\"/>\n",
        x(c.ratio->min), y, x(c.ratio->max), y, color);
    s += fmt::format("<circle cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"5\" fill=\"{}\"/>\n", x(c.ratio->median), y, color);
    s += fmt::format("<text x=\"{:.2f}\" y=\"{:.2f}\" dominant-baseline=\"middle\">{:.4f} ({:.4f}–{:.4f})</text>\n",
                     x1 + 12, y, c.ratio->median, c.ratio->min, c.ratio->max);
  }
  s += "</svg>\n";
  return s;
}

}  // namespace kiln::bench
