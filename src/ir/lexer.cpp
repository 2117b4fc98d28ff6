#include "ir/lexer.h"

#include <fmt/format.h>

#include <algorithm>

namespace kiln::ir {
namespace {

bool isDigit(char c) {
  return c >= '0' && c <= '9';
}
bool isAlpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool isNameChar(char c) {
  return isAlpha(c) || isDigit(c) || c == '.';
}

}  // namespace

std::string describe(const Token& t) {
  if (t.kind == Tok::End) return "end of file";
  if (t.kind == Tok::Error) return t.error;
  constexpr size_t kMax = 40;
  if (t.text.size() > kMax) return fmt::format("'{}...'", t.text.substr(0, kMax));
  return fmt::format("'{}'", t.text);
}

void Lexer::advance(size_t n) {
  for (size_t i = 0; i < n && pos_ < src_.size(); ++i, ++pos_) {
    if (src_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
  }
}

void Lexer::skipSpaceAndComments() {
  while (pos_ < src_.size()) {
    char c = src_[pos_];
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      advance(1);
    } else if (c == '#' || (c == '/' && pos_ + 1 < src_.size() && src_[pos_ + 1] == '/')) {
      size_t end = src_.find('\n', pos_);
      size_t len = (end == std::string_view::npos ? src_.size() : end) - pos_;
      pos_ += len;  // no newline inside: only the column moves
      col_ = static_cast<int>(std::min<size_t>(static_cast<size_t>(col_) + len, size_t{1} << 30));
    } else {
      return;
    }
  }
}

Token Lexer::next() {
  skipSpaceAndComments();
  Token t;
  t.line = line_;
  t.col = col_;
  if (pos_ >= src_.size()) return t;
  const size_t start = pos_;
  const char c = src_[pos_];
  auto finish = [&](Tok kind, size_t len) {
    t.kind = kind;
    t.text = src_.substr(start, len);
    advance(len);
    return t;
  };
  auto scanWhile = [&](size_t from, bool (*pred)(char)) {
    while (from < src_.size() && pred(src_[from])) ++from;
    return from;
  };

  switch (c) {
    case '(': return finish(Tok::LParen, 1);
    case ')': return finish(Tok::RParen, 1);
    case '{': return finish(Tok::LBrace, 1);
    case '}': return finish(Tok::RBrace, 1);
    case '[': return finish(Tok::LBracket, 1);
    case ']': return finish(Tok::RBracket, 1);
    case ',': return finish(Tok::Comma, 1);
    case ':': return finish(Tok::Colon, 1);
    case '=': return finish(Tok::Equal, 1);
    case '<': return finish(Tok::Less, 1);
    case '>': return finish(Tok::Greater, 1);
    default: break;
  }

  if (c == '%' || c == '@') {
    size_t end = scanWhile(start + 1, isNameChar);
    if (end == start + 1) {
      t.error = fmt::format("expected a name after '{}' (letters, digits, '_' or '.')", c);
      return finish(Tok::Error, 1);
    }
    return finish(c == '%' ? Tok::Value : Tok::Global, end - start);
  }

  if (isAlpha(c)) return finish(Tok::Ident, scanWhile(start, isNameChar) - start);

  if (isDigit(c) || c == '-') {
    size_t p = start + (c == '-' ? 1 : 0);
    if (c == '-' && src_.substr(p, 3) == "inf" && (p + 3 >= src_.size() || !isNameChar(src_[p + 3])))
      return finish(Tok::Float, 4);
    if (p >= src_.size() || !isDigit(src_[p])) {
      t.error = "expected a digit or 'inf' after '-'";
      return finish(Tok::Error, 1);
    }
    p = scanWhile(p, isDigit);
    bool isFloat = false;
    if (p < src_.size() && src_[p] == '.') {
      isFloat = true;
      p = scanWhile(p + 1, isDigit);
    }
    if (p < src_.size() && (src_[p] == 'e' || src_[p] == 'E')) {
      size_t q = p + 1;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < src_.size() && isDigit(src_[q])) {
        isFloat = true;
        p = scanWhile(q, isDigit);
      }
    }
    if (p < src_.size() && (isNameChar(src_[p]) || src_[p] == '%' || src_[p] == '@')) {
      size_t end = scanWhile(p, isNameChar);
      t.error = fmt::format("malformed number '{}'", src_.substr(start, std::min<size_t>(end - start, 40)));
      return finish(Tok::Error, end - start);
    }
    return finish(isFloat ? Tok::Float : Tok::Int, p - start);
  }

  unsigned char u = static_cast<unsigned char>(c);
  if (u >= 0x21 && u < 0x7f)
    t.error = fmt::format("unexpected character '{}'", c);
  else
    t.error = fmt::format("unexpected byte 0x{:02x}", u);
  return finish(Tok::Error, 1);
}

}  // namespace kiln::ir
