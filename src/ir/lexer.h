// Lexer for the TileIR text form (docs/ir.md, "Lexical form").
// Expects: any bytes (NUL, invalid UTF-8 and truncated input included).
// Guarantees: a stream of tokens with 1-based line/column (in bytes), ending in End; a byte
// that starts no token becomes an Error token that says why. Never reads past the input.
#pragma once

#include <string>
#include <string_view>

namespace kiln::ir {

enum class Tok : unsigned char {
  End,       // end of input
  Error,     // a byte sequence that starts no token; Token::error says why
  Ident,     // [A-Za-z_][A-Za-z0-9_.]*  (keywords, op names, dim names, inf, nan)
  Value,     // %name
  Global,    // @name
  Int,       // -?[0-9]+
  Float,     // -?[0-9]+(.[0-9]*)?([eE][+-]?[0-9]+)? with a '.' or an exponent, or -inf
  LParen,    // (
  RParen,    // )
  LBrace,    // {
  RBrace,    // }
  LBracket,  // [
  RBracket,  // ]
  Comma,     // ,
  Colon,     // :
  Equal,     // =
  Less,      // <
  Greater,   // >
};

struct Token {
  Tok kind = Tok::End;
  std::string_view text;  // the token's bytes (with the '%' / '@' sigil); empty for End
  int line = 1;
  int col = 1;
  std::string error;  // Error only

  // The name without its sigil (Value / Global).
  std::string_view name() const { return text.empty() ? text : text.substr(1); }
};

// Human-readable token for "expected X, got Y" messages: 'foo' (shortened), end of file.
std::string describe(const Token& t);

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {}
  Token next();

 private:
  void skipSpaceAndComments();
  void advance(size_t n);

  std::string_view src_;
  size_t pos_ = 0;
  int line_ = 1;
  int col_ = 1;
};

}  // namespace kiln::ir
