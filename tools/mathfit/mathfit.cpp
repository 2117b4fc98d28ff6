// mathfit: fits the polynomial coefficients of Kiln's f32 math algorithms (src/math).
// Offline tool, not part of the build. Build and run:
//   g++ -O2 -std=c++20 tools/mathfit/mathfit.cpp -o /tmp/mathfit && /tmp/mathfit
// Method: discrete weighted minimax on a dense Chebyshev-spaced grid by Lawson's iteratively
// reweighted least squares (Householder QR in long double on a scaled monomial basis), then
// coefficients are rounded to float one at a time, lowest power first, re-fitting the
// remaining ones after each rounding so that they absorb the rounding error.
// Reference values come from long double (80-bit) functions or convergent series.
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace {

using LD = long double;

struct Problem {
  std::string name;
  LD lo, hi;                     // interval of the polynomial's variable
  std::function<LD(LD)> target;  // function to approximate by sum c_j x^p_j
  std::function<LD(LD)> weight;  // error weight (minimize max |weight * (target - poly)|)
  std::vector<int> powers;
};

// Solves min || W (A c - y) ||_2 by Householder QR. A is n x m, row-major.
std::vector<LD> weightedLeastSquares(std::vector<std::vector<LD>> a, std::vector<LD> y, const std::vector<LD>& w) {
  size_t n = a.size(), m = a[0].size();
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < m; ++j) a[i][j] *= w[i];
    y[i] *= w[i];
  }
  for (size_t k = 0; k < m; ++k) {
    LD norm = 0;
    for (size_t i = k; i < n; ++i) norm += a[i][k] * a[i][k];
    norm = std::sqrt(norm);
    LD alpha = a[k][k] > 0 ? -norm : norm;
    std::vector<LD> v(n, 0);
    v[k] = a[k][k] - alpha;
    for (size_t i = k + 1; i < n; ++i) v[i] = a[i][k];
    LD vv = 0;
    for (size_t i = k; i < n; ++i) vv += v[i] * v[i];
    if (vv == 0) continue;
    for (size_t j = k; j < m; ++j) {
      LD d = 0;
      for (size_t i = k; i < n; ++i) d += v[i] * a[i][j];
      d = 2 * d / vv;
      for (size_t i = k; i < n; ++i) a[i][j] -= d * v[i];
    }
    LD d = 0;
    for (size_t i = k; i < n; ++i) d += v[i] * y[i];
    d = 2 * d / vv;
    for (size_t i = k; i < n; ++i) y[i] -= d * v[i];
  }
  std::vector<LD> c(m, 0);
  for (size_t k = m; k-- > 0;) {
    LD s = y[k];
    for (size_t j = k + 1; j < m; ++j) s -= a[k][j] * c[j];
    c[k] = s / a[k][k];
  }
  return c;
}

// Lawson iterations: returns coefficients of the free powers (fixed ones are subtracted).
std::vector<LD> minimax(const std::vector<LD>& xs, const std::vector<LD>& ys, const std::vector<LD>& ws,
                        const std::vector<int>& powers, LD scale, LD* maxErr) {
  size_t n = xs.size();
  std::vector<std::vector<LD>> a(n, std::vector<LD>(powers.size()));
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < powers.size(); ++j) a[i][j] = std::pow(xs[i] / scale, (LD)powers[j]);
  std::vector<LD> u(n, 1.0L / n), c;
  for (int it = 0; it < 400; ++it) {
    std::vector<LD> w(n);
    for (size_t i = 0; i < n; ++i) w[i] = std::sqrt(u[i]) * ws[i];
    c = weightedLeastSquares(a, ys, w);
    LD sum = 0, mx = 0;
    std::vector<LD> e(n);
    for (size_t i = 0; i < n; ++i) {
      LD p = 0;
      for (size_t j = 0; j < powers.size(); ++j) p += c[j] * a[i][j];
      e[i] = std::fabs((ys[i] - p) * ws[i]);
      mx = std::max(mx, e[i]);
    }
    for (size_t i = 0; i < n; ++i) {
      u[i] *= e[i];
      sum += u[i];
    }
    if (sum == 0) break;
    for (size_t i = 0; i < n; ++i) u[i] /= sum;
    *maxErr = mx;
  }
  for (size_t j = 0; j < powers.size(); ++j) c[j] /= std::pow(scale, (LD)powers[j]);
  return c;
}

void fit(const Problem& p) {
  const int N = 3000;
  std::vector<LD> xs, ys, ws;
  const LD pi = 3.14159265358979323846264338327950288L;
  for (int i = 0; i <= N; ++i) {
    LD x = (p.lo + p.hi) / 2 + (p.hi - p.lo) / 2 * std::cos(pi * (N - i) / N);
    xs.push_back(x);
    ys.push_back(p.target(x));
    ws.push_back(p.weight(x));
  }
  LD scale = std::max(std::fabs(p.lo), std::fabs(p.hi));
  std::vector<int> freeP = p.powers;
  std::vector<float> fixedC;
  std::vector<LD> resid = ys;
  LD err = 0;
  std::vector<LD> c = minimax(xs, resid, ws, freeP, scale, &err);
  std::printf("// %s: real-coefficient minimax weighted error %.3Lg\n", p.name.c_str(), err);
  while (!freeP.empty()) {
    c = minimax(xs, resid, ws, freeP, scale, &err);
    float f = (float)c[0];
    fixedC.push_back(f);
    for (size_t i = 0; i < xs.size(); ++i) resid[i] -= (LD)f * std::pow(xs[i], (LD)freeP[0]);
    freeP.erase(freeP.begin());
  }
  LD mx = 0;
  for (size_t i = 0; i < xs.size(); ++i) mx = std::max(mx, std::fabs(resid[i] * ws[i]));
  std::printf("// %s: float-coefficient weighted error %.3Lg\n", p.name.c_str(), mx);
  for (size_t j = 0; j < fixedC.size(); ++j)
    std::printf("inline constexpr float k%s%d = %af;  // %.9g\n", p.name.c_str(), p.powers[j], fixedC[j], fixedC[j]);
}

// Series sum_{n>=1} 2 z^n / (2n+1) = (2 atanh(s) - 2s) / s, z = s^2.
LD logTail(LD z) {
  LD s = 0, zn = 1;
  for (int n = 1; n < 40; ++n) {
    zn *= z;
    s += 2 * zn / (2 * n + 1);
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  int expDeg = 4, logDeg = 4, tanhDeg = 6, erfSmallDeg = 6, erfBigDeg = 9;
  // Optional arguments override the degrees: exp log tanh erf-small erf-big.
  int* degs[] = {&expDeg, &logDeg, &tanhDeg, &erfSmallDeg, &erfBigDeg};
  for (int i = 1; i < argc && i <= 5; ++i) std::sscanf(argv[i], "%d", degs[i - 1]);
  auto range = [](int lo, int hi) {
    std::vector<int> v;
    for (int i = lo; i <= hi; ++i) v.push_back(i);
    return v;
  };
  const LD rmax = 0.3467L;
  // exp: e^r = 1 + r + r^2 q(r); weight = r^2 / e^r (relative error of e^r).
  fit({"Exp", -rmax, rmax,
       [](LD r) {
         if (std::fabs(r) < 1e-5L) return 0.5L + r / 6 + r * r / 24 + r * r * r / 120;
         return (std::expm1(r) - r) / (r * r);
       },
       [](LD r) { return r * r / std::exp(r); }, range(0, expDeg)});
  // log: log1p(f) = 2s + s R(z), z = s^2, s = f / (2 + f); |s| <= (sqrt2-1)/(sqrt2+1).
  const LD smax = (std::sqrt(2.0L) - 1) / (std::sqrt(2.0L) + 1) * 1.0001L;
  fit({"Log", 0, smax * smax, logTail, [](LD) { return 1.0L; }, range(1, logDeg)});
  // tanh on |x| < kTanhSmall: tanh(a) = a + a z P(z), z = a^2; weight: relative error.
  const LD tsmall = 0.5625L;
  fit({"Tanh", 0, tsmall * tsmall,
       [](LD z) {
         if (z < 1e-6L) return -1.0L / 3 + 2 * z / 15 - 17 * z * z / 315;
         LD a = std::sqrt(z);
         return (std::tanh(a) / a - 1) / z;
       },
       [](LD z) {
         if (z == 0) return 0.0L;
         LD a = std::sqrt(z);
         return a * z / std::tanh(a);
       },
       range(0, tanhDeg - 1)});
  // erf on |x| < 1: erf(a) = a + a P(z); weight: relative error.
  fit({"ErfSmall", 0, 1,
       [](LD z) {
         if (z == 0) return 2 / std::sqrt(3.14159265358979323846264338327950288L) - 1;
         LD a = std::sqrt(z);
         return std::erf(a) / a - 1;
       },
       [](LD z) {
         if (z == 0) return 1.0L;
         LD a = std::sqrt(z);
         return a / std::erf(a);
       },
       range(0, erfSmallDeg)});
  // erf on 1 <= |x| <= 4: erf(a) = 1 - exp(-a^2) Q(t), t = a - 2.5; weight: absolute error.
  fit({"ErfBig", -1.5L, 1.5L,
       [](LD t) {
         LD a = t + 2.5L;
         return std::erfc(a) * std::exp(a * a);
       },
       [](LD t) {
         LD a = t + 2.5L;
         return std::exp(-a * a);
       },
       range(0, erfBigDeg)});
  return 0;
}
