#include "fuzz/shrink.h"

#include <fmt/format.h>

#include <chrono>
#include <functional>
#include <memory>
#include <regex>
#include <set>
#include <sstream>

#include "ir/diag.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace kiln::fuzz {
namespace {

using Lines = std::vector<std::string>;

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(' ');
  return a == std::string::npos ? "" : s.substr(a);
}

// The lines of a canonical text, with the kernel's header (which the printer may spread over
// several lines) joined into line 0, so that line 1 is the root parallel op.
Lines split(const std::string& text) {
  Lines out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    if (out.size() == 1 && out[0].back() != '{') {
      out[0] += (out[0].back() == '(' || l == ") {" ? "" : " ") + trim(l);
      continue;
    }
    out.push_back(l);
  }
  return out;
}

std::string join(const Lines& lines) {
  std::string s;
  for (const std::string& l : lines) s += l + "\n";
  return s;
}

std::unique_ptr<ir::Kernel> parseValid(const std::string& text) {
  ir::DiagEngine diag;
  auto k = ir::parseKernel(text, "shrink.tile", diag);
  if (!k || diag.hasErrors() || !ir::verify(*k, diag)) return nullptr;
  return k;
}

bool wordChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
}

// Positions of `name` (with its '%') in `line` as a whole value name.
std::vector<size_t> occurrences(const std::string& line, const std::string& name) {
  std::vector<size_t> at;
  for (size_t p = line.find(name); p != std::string::npos; p = line.find(name, p + 1))
    if (p + name.size() >= line.size() || !wordChar(line[p + name.size()])) at.push_back(p);
  return at;
}

std::string renamed(std::string line, const std::string& from, const std::string& to) {
  auto at = occurrences(line, from);
  for (auto it = at.rbegin(); it != at.rend(); ++it) line.replace(*it, from.size(), to);
  return line;
}

std::string indentOf(const std::string& s) {
  return s.substr(0, s.find_first_not_of(' '));
}

// The values a line defines ("%a, %b = ..."), or none.
std::vector<std::string> defs(const std::string& line) {
  std::string t = trim(line);
  size_t eq = t.find(" = ");
  if (t.empty() || t[0] != '%' || eq == std::string::npos) return {};
  std::vector<std::string> out;
  std::string lhs = t.substr(0, eq);
  for (size_t p = 0; p < lhs.size();) {
    size_t c = lhs.find(", ", p);
    out.push_back(lhs.substr(p, c == std::string::npos ? std::string::npos : c - p));
    p = c == std::string::npos ? lhs.size() : c + 2;
  }
  return out;
}

// Splits at commas outside brackets and parentheses.
std::vector<std::string> splitTop(const std::string& s) {
  std::vector<std::string> out;
  int depth = 0;
  std::string cur;
  for (char c : s) {
    if (c == '[' || c == '(') ++depth;
    if (c == ']' || c == ')') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!trim(cur).empty()) out.push_back(trim(cur));
  return out;
}

// The result types of a definition line (the text after the last " : ", without " {").
std::vector<std::string> resultTypes(const std::string& line) {
  std::string t = line;
  if (t.size() >= 2 && t.compare(t.size() - 2, 2, " {") == 0) t.resize(t.size() - 2);
  size_t c = t.rfind(" : ");
  if (c == std::string::npos) return {};
  return splitTop(t.substr(c + 3));
}

bool opensBlock(const std::string& l) {
  return l.size() >= 2 && l.compare(l.size() - 2, 2, " {") == 0;
}

// The index of the line closing the block opened at `i` (or `i` for a single line).
size_t blockEnd(const Lines& L, size_t i) {
  if (!opensBlock(L[i])) return i;
  int depth = 0;
  for (size_t j = i; j < L.size(); ++j) {
    for (char c : L[j]) depth += c == '{' ? 1 : c == '}' ? -1 : 0;
    if (depth == 0) return j;
  }
  return L.size() - 1;
}

bool usedOutside(const Lines& L, size_t first, size_t last, const std::string& name) {
  for (size_t j = 0; j < L.size(); ++j)
    if ((j < first || j > last) && !occurrences(L[j], name).empty()) return true;
  return false;
}

// Body lines that are ops (not the kernel/parallel lines, closing braces, yields, stages).
bool isOpLine(const Lines& L, size_t i) {
  if (i < 2 || i + 2 >= L.size()) return false;
  std::string t = trim(L[i]);
  return !t.empty() && t != "}" && t.rfind("yield", 0) != 0 && t.rfind("stage ", 0) != 0 && t[0] != '#';
}

Lines replaceBlockByConsts(const Lines& L, size_t i) {
  size_t end = blockEnd(L, i);
  Lines out(L.begin(), L.begin() + static_cast<long>(i));
  auto names = defs(L[i]);
  auto types = resultTypes(L[i]);
  for (size_t r = 0; r < names.size() && r < types.size(); ++r)
    out.push_back(fmt::format("{}{} = const 0 : {}", indentOf(L[i]), names[r], types[r]));
  out.insert(out.end(), L.begin() + static_cast<long>(end) + 1, L.end());
  return out;
}

// Dead ops (no use of any result, no store inside), to a fixed point.
Lines deadCodeRemoved(Lines L) {
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = L.size(); i-- > 0;) {
      if (!isOpLine(L, i)) continue;
      auto names = defs(L[i]);
      if (names.empty()) continue;
      size_t end = blockEnd(L, i);
      bool stores = false;
      for (size_t j = i; j <= end; ++j) stores = stores || trim(L[j]).rfind("store ", 0) == 0;
      bool used = stores;
      for (const std::string& n : names) used = used || usedOutside(L, i, end, n);
      if (used) continue;
      L.erase(L.begin() + static_cast<long>(i), L.begin() + static_cast<long>(end) + 1);
      changed = true;
    }
  }
  return L;
}

// Erases the dead single-line op at `i`, then every op that only it read, and so on (a value with
// a dim of extent 0 must go together with the mma that reads it).
Lines withDeadOperands(Lines L, size_t i) {
  std::vector<size_t> work = {i};  // erased from the back, so the other indices stay valid
  while (!work.empty()) {
    size_t at = work.back();
    work.pop_back();
    std::string gone = L[at];
    L.erase(L.begin() + static_cast<long>(at));
    size_t from = gone.find(" = ");
    for (size_t p = gone.find('%', from == std::string::npos ? 0 : from); p != std::string::npos;
         p = gone.find('%', p + 1)) {
      size_t e = p + 1;
      while (e < gone.size() && wordChar(gone[e])) ++e;
      const std::string name = gone.substr(p, e - p);
      for (size_t j = 0; j < L.size(); ++j) {
        auto d = defs(L[j]);
        if (!isOpLine(L, j) || opensBlock(L[j]) || d.size() != 1 || d[0] != name) continue;
        if (!usedOutside(L, j, j, name)) work.push_back(j);
        break;
      }
    }
    std::sort(work.begin(), work.end());
    work.erase(std::unique(work.begin(), work.end()), work.end());
  }
  return L;
}

// Candidates that drop one unused parameter each.
std::vector<Lines> unusedParamsDropped(const Lines& L) {
  std::vector<Lines> out;
  // Parameters: "kernel @NAME(P, P, ...) {".
  size_t open = L[0].find('('), close = L[0].rfind(')');
  if (open == std::string::npos || close == std::string::npos) return out;
  auto params = splitTop(L[0].substr(open + 1, close - open - 1));
  for (size_t i = 0; i < params.size(); ++i) {
    if (usedOutside(L, 0, 0, params[i].substr(0, params[i].find(':')))) continue;
    auto keep = params;
    keep.erase(keep.begin() + static_cast<long>(i));
    Lines c = L;
    c[0] = fmt::format("{}{}{}", L[0].substr(0, open + 1), fmt::join(keep, ", "), L[0].substr(close));
    out.push_back(c);
  }
  return out;
}

class Shrinker {
 public:
  Shrinker(const std::function<bool(const ir::Kernel&)>& pred, const ShrinkOptions& o) : pred_(pred), o_(o) {
    start_ = std::chrono::steady_clock::now();
  }

  std::string run(const std::string& text) {
    auto k = parseValid(text);
    if (!k) return text;
    current_ = ir::print(*k);
    tried_.insert(current_);
    using Pass = std::vector<std::string> (Shrinker::*)(const Lines&);
    const std::vector<Pass> passes = {&Shrinker::dropStores,  &Shrinker::dropLoops,  &Shrinker::deadCode,
                                      &Shrinker::dropOps,     &Shrinker::loopsOnce,  &Shrinker::dimExtents,
                                      &Shrinker::viewExtents, &Shrinker::rootExtents};
    for (bool progress = true; progress && !outOfBudget();) {
      progress = false;
      for (Pass pass : passes) {
        // Re-derive the candidates after every kept change: line numbers move.
        for (bool kept = true; kept && !outOfBudget();) {
          kept = false;
          for (const std::string& c : (this->*pass)(split(current_))) {
            if (outOfBudget()) break;
            if (tryCandidate(c)) {
              kept = progress = true;
              break;
            }
          }
        }
      }
    }
    return current_;
  }

  ShrinkStats stats;

 private:
  bool outOfBudget() const {
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    return stats.attempts >= o_.max_attempts || s >= o_.max_seconds;
  }

  bool tryCandidate(const std::string& text) {
    auto k = parseValid(text);
    if (!k) return false;
    std::string canon = ir::print(*k);
    if (!tried_.insert(canon).second) return false;
    ++stats.attempts;
    if (!pred_(*k)) return false;
    ++stats.kept;
    current_ = canon;
    return true;
  }

  std::vector<std::string> dropStores(const Lines& L) {
    std::vector<std::string> out;
    for (size_t i = L.size(); i-- > 0;)
      if (isOpLine(L, i) && trim(L[i]).rfind("store ", 0) == 0) {
        Lines c = L;
        c.erase(c.begin() + static_cast<long>(i));
        out.push_back(join(c));
      }
    return out;
  }

  // A loop replaced by its inits (as if it ran zero times), or by consts of its result types.
  std::vector<std::string> dropLoops(const Lines& L) {
    static const std::regex carried(R"((%[A-Za-z0-9_.]+) = (%[A-Za-z0-9_.]+))");
    std::vector<std::string> out;
    for (size_t i = 0; i < L.size(); ++i) {
      if (!isOpLine(L, i) || !opensBlock(L[i])) continue;
      size_t iter = L[i].find(" iter(");
      auto results = defs(L[i]);
      if (iter != std::string::npos) {
        std::vector<std::string> inits;
        std::string list = L[i].substr(iter);
        for (std::sregex_iterator it(list.begin(), list.end(), carried), e; it != e; ++it)
          inits.push_back((*it)[2].str());
        if (inits.size() == results.size()) {
          size_t end = blockEnd(L, i);
          Lines c(L.begin(), L.begin() + static_cast<long>(i));
          for (size_t j = end + 1; j < L.size(); ++j) {
            std::string l = L[j];
            for (size_t r = 0; r < results.size(); ++r) l = renamed(l, results[r], inits[r]);
            c.push_back(l);
          }
          out.push_back(join(c));
        }
      }
      out.push_back(join(replaceBlockByConsts(L, i)));
    }
    return out;
  }

  // All dead code at once, or one unused parameter or dead op at a time (when the failure
  // needs some of the dead code).
  std::vector<std::string> deadCode(const Lines& L) {
    std::vector<std::string> out = {join(deadCodeRemoved(L))};
    for (const Lines& c : unusedParamsDropped(L)) out.push_back(join(c));
    for (size_t i = L.size(); i-- > 0;) {
      if (!isOpLine(L, i) || opensBlock(L[i])) continue;
      auto names = defs(L[i]);
      bool used = names.empty();
      for (const std::string& n : names) used = used || usedOutside(L, i, i, n);
      if (used) continue;
      out.push_back(join(withDeadOperands(L, i)));
    }
    return out;
  }

  std::vector<std::string> dropOps(const Lines& L) {
    std::vector<std::string> out;
    for (size_t i = L.size(); i-- > 0;) {
      if (!isOpLine(L, i) || opensBlock(L[i])) continue;
      auto names = defs(L[i]);
      auto types = resultTypes(L[i]);
      if (names.size() != 1 || types.size() != 1) continue;
      // Uses replaced by the nearest earlier value of the same type.
      for (size_t j = i; j-- > 2;) {
        auto dj = defs(L[j]);
        auto tj = resultTypes(L[j]);
        if (dj.size() != 1 || tj.size() != 1 || tj[0] != types[0]) continue;
        Lines c = L;
        c.erase(c.begin() + static_cast<long>(i));
        for (size_t u = i; u < c.size(); ++u) c[u] = renamed(c[u], names[0], dj[0]);
        out.push_back(join(c));
        break;
      }
      // Or by a constant.
      std::string k = fmt::format("{}{} = const 0 : {}", indentOf(L[i]), names[0], types[0]);
      if (L[i] != k) {
        Lines c = L;
        c[i] = k;
        out.push_back(join(c));
      }
    }
    return out;
  }

  std::vector<std::string> loopsOnce(const Lines& L) {
    static const std::regex bounds(R"( = (\S+) to (\S+) step (\d+))");
    std::vector<std::string> out;
    for (size_t i = 0; i < L.size(); ++i) {
      if (!isOpLine(L, i) || !opensBlock(L[i])) continue;
      std::string once = std::regex_replace(L[i], bounds, " = 0 to 1 step 1", std::regex_constants::format_first_only);
      if (once != L[i]) {
        Lines c = L;
        c[i] = once;
        out.push_back(join(c));
      }
      size_t p = L[i].find("pipeline ");
      if (p != std::string::npos) {
        Lines c = L;
        c[i].replace(p, 9, "serial ");
        size_t end = blockEnd(c, i);
        for (size_t j = end; j > i; --j)
          if (trim(c[j]).rfind("stage ", 0) == 0 && indentOf(c[j]).size() == indentOf(c[i]).size() + 2)
            c.erase(c.begin() + static_cast<long>(j));
        out.push_back(join(c));
      }
    }
    return out;
  }

  static std::vector<int64_t> smaller(int64_t e) {
    std::vector<int64_t> out;
    for (int64_t s : {int64_t{1}, e / 2, e - 1})
      if (s >= 1 && s < e && std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
    return out;
  }

  std::vector<std::string> dimExtents(const Lines& L) {
    static const std::regex dim(R"(([A-Za-z_][A-Za-z0-9_.]*):([0-9]+))");
    std::set<std::pair<std::string, int64_t>> found;
    for (size_t i = 1; i < L.size(); ++i)
      for (std::sregex_iterator it(L[i].begin(), L[i].end(), dim), e; it != e; ++it)
        found.insert({(*it)[1].str(), std::stoll((*it)[2].str())});
    std::vector<std::string> out;
    for (const auto& [name, extent] : found)
      for (int64_t s : smaller(extent)) {
        const std::regex exact("(^|[^A-Za-z0-9_.%])" + name + ":" + std::to_string(extent) + "(?![0-9])");
        Lines c = L;
        for (size_t i = 1; i < c.size(); ++i)
          c[i] = std::regex_replace(c[i], exact, "$1" + name + ":" + std::to_string(s));
        out.push_back(join(c));
      }
    return out;
  }

  // Shrinks one number inside the bracket/parenthesis list that starts at `open` in line `i`.
  static std::vector<std::string> listShrinks(const Lines& L, size_t i, size_t open, char closeChar) {
    std::vector<std::string> out;
    size_t close = L[i].find(closeChar, open);
    if (close == std::string::npos) return out;
    auto items = splitTop(L[i].substr(open + 1, close - open - 1));
    for (size_t k = 0; k < items.size(); ++k) {
      int64_t e = 0;
      try {
        e = std::stoll(items[k]);
      } catch (...) {
        continue;
      }
      for (int64_t s : smaller(e)) {
        auto c = items;
        c[k] = std::to_string(s);
        Lines n = L;
        n[i] = fmt::format("{}{}{}", L[i].substr(0, open + 1), fmt::join(c, ", "), L[i].substr(close));
        out.push_back(join(n));
      }
    }
    return out;
  }

  std::vector<std::string> viewExtents(const Lines& L) {
    std::vector<std::string> out;
    for (const char* f : {"view<f32>[", "view<f16>[", "view<bf16>["}) {
      const size_t open = std::string(f).size() - 1;  // the '['
      for (size_t p = L[0].find(f); p != std::string::npos; p = L[0].find(f, p + 1)) {
        auto c = listShrinks(L, 0, p + open, ']');
        out.insert(out.end(), c.begin(), c.end());
      }
    }
    return out;
  }

  std::vector<std::string> rootExtents(const Lines& L) {
    for (size_t i = 0; i < L.size(); ++i)
      if (trim(L[i]).rfind("parallel ", 0) == 0) {
        size_t in = L[i].find(" in (");
        if (in != std::string::npos) return listShrinks(L, i, in + 4, ')');
      }
    return {};
  }

  std::function<bool(const ir::Kernel&)> pred_;
  ShrinkOptions o_;
  std::chrono::steady_clock::time_point start_;
  std::string current_;
  std::set<std::string> tried_;
};

}  // namespace

std::string shrink(const std::string& text, const std::function<bool(const ir::Kernel&)>& stillFails,
                   const ShrinkOptions& options, ShrinkStats* stats) {
  Shrinker s(stillFails, options);
  std::string out = s.run(text);
  if (stats) *stats = s.stats;
  return out;
}

}  // namespace kiln::fuzz
