// A small streaming JSON writer (pretty-printed, 2-space indent) for the replay's reports.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::replay {

class JsonWriter {
 public:
  JsonWriter& beginObject();
  JsonWriter& endObject();
  JsonWriter& beginArray();
  JsonWriter& endArray();
  JsonWriter& key(const std::string& name);  // inside an object, before each value

  JsonWriter& string(const std::string& value);
  JsonWriter& boolean(bool value);
  JsonWriter& integer(int64_t value);
  JsonWriter& unsignedInteger(uint64_t value);
  JsonWriter& number(double value);  // shortest round-trip form; null when not finite
  JsonWriter& null();
  // The value when `present`, else null.
  JsonWriter& numberOrNull(bool present, double value) { return present ? number(value) : null(); }
  JsonWriter& unsignedOrNull(bool present, uint64_t value) { return present ? unsignedInteger(value) : null(); }
  JsonWriter& stringOrNull(bool present, const std::string& value) { return present ? string(value) : null(); }

  // Shorthands for a key and its value.
  JsonWriter& field(const std::string& name, const std::string& value) { return key(name).string(value); }
  JsonWriter& field(const std::string& name, const char* value) { return key(name).string(value); }
  JsonWriter& field(const std::string& name, bool value) { return key(name).boolean(value); }
  JsonWriter& field(const std::string& name, int value) { return key(name).integer(value); }
  JsonWriter& field(const std::string& name, int64_t value) { return key(name).integer(value); }
  JsonWriter& field(const std::string& name, uint64_t value) { return key(name).unsignedInteger(value); }
  JsonWriter& field(const std::string& name, double value) { return key(name).number(value); }

  // The document; complete once every object and array is closed.
  std::string str() const { return out_ + "\n"; }

  static std::string escape(const std::string& s);  // with the quotes
  static std::string formatNumber(double value);    // shortest round-trip; "null" when not finite

 private:
  void beforeValue();
  void newline();

  struct Level {
    bool object = false;
    int count = 0;
  };
  std::string out_;
  std::vector<Level> stack_;
  bool after_key_ = false;
};

}  // namespace kiln::replay
