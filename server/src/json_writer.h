// Writes JSON text straight into a string, value by value: the results JSON of a large
// model has millions of values, and a JSON tree of them costs several times the text
// (building, dumping and freeing it). Commas are placed by the writer; keys are written
// in the order given. The text is complete once finish() ran (or the writer is gone).
#pragma once

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace wavecast {

class JsonWriter {
public:
  explicit JsonWriter(std::string& out) : out_(out), size_(out.size()) {}
  ~JsonWriter() { finish(); }
  JsonWriter(const JsonWriter&) = delete;
  JsonWriter& operator=(const JsonWriter&) = delete;

  // Trims the string to the text written.
  void finish() { out_.resize(size_); }

  JsonWriter& beginObject() { return open('{'); }
  JsonWriter& endObject() { return close('}'); }
  JsonWriter& beginArray() { return open('['); }
  JsonWriter& endArray() { return close(']'); }

  // `name` is written as it is: the keys are wavecast's own snake_case names.
  JsonWriter& key(std::string_view name) {
    separate();
    char* p = room(name.size() + 3);
    *p++ = '"';
    std::memcpy(p, name.data(), name.size());
    p += name.size();
    *p++ = '"';
    *p = ':';
    size_ += name.size() + 3;
    afterKey_ = true;
    return *this;
  }

  template <class T> JsonWriter& field(std::string_view name, const T& value) {
    key(name);
    return this->value(value);
  }

  template <class T> JsonWriter& value(const T& value) {
    separate();
    write(value);
    return *this;
  }

private:
  // At least `bytes` more of writable room at data() + size_.
  char* room(size_t bytes) {
    if (size_ + bytes > out_.size()) // into the capacity reserved first, then doubling
      out_.resize(std::max({out_.capacity(), out_.size() * 2, size_ + bytes + 4096}));
    return out_.data() + size_;
  }
  void put(char c) {
    *room(1) = c;
    ++size_;
  }
  void put(std::string_view text) {
    std::memcpy(room(text.size()), text.data(), text.size());
    size_ += text.size();
  }

  JsonWriter& open(char bracket) {
    separate();
    put(bracket);
    assert(depth_ < kMaxDepth);
    first_[depth_++] = true;
    return *this;
  }
  JsonWriter& close(char bracket) {
    put(bracket);
    --depth_;
    return *this;
  }
  void separate() {
    if (afterKey_) {
      afterKey_ = false;
      return;
    }
    if (depth_ > 0) {
      if (!first_[depth_ - 1])
        put(',');
      first_[depth_ - 1] = false;
    }
  }

  void write(bool value) { put(value ? std::string_view("true") : std::string_view("false")); }
  void write(std::nullptr_t) { put("null"); }
  void write(const char* text) { string(text); }
  void write(const std::string& text) { string(text); }
  void write(std::string_view text) { string(text); }
  template <class T> void write(const std::optional<T>& value) {
    if (value)
      write(*value);
    else
      put("null");
  }
  template <class T> void write(const std::vector<T>& values) {
    put('[');
    bool first = true;
    for (const auto& item : values) {
      if (!first)
        put(',');
      first = false;
      write(item);
    }
    put(']');
  }
  template <class T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0> void write(T value) {
    constexpr size_t kRoom = 40;
    char* begin = room(kRoom);
    if constexpr (std::is_floating_point_v<T>) {
      if (!std::isfinite(value)) { // as nlohmann::json writes them
        put("null");
        return;
      }
      char* end = std::to_chars(begin, begin + kRoom - 2, double(value)).ptr;
      // A whole number stays a JSON number with a fraction, as the tree encoder wrote it.
      if (std::find_if(begin, end, [](char c) { return c == '.' || c == 'e'; }) == end) {
        *end++ = '.';
        *end++ = '0';
      }
      size_ += end - begin;
    } else {
      size_ += std::to_chars(begin, begin + kRoom, value).ptr - begin;
    }
  }

  void string(std::string_view text) {
    // Worst case: every byte a \u00XX escape, plus the quotes.
    char* p = room(text.size() * 6 + 2);
    char* const begin = p;
    *p++ = '"';
    for (const char ch : text) {
      const auto c = static_cast<unsigned char>(ch);
      if (c >= 0x20 && c != '"' && c != '\\') {
        *p++ = ch;
        continue;
      }
      *p++ = '\\';
      switch (c) {
      case '"':
        *p++ = '"';
        break;
      case '\\':
        *p++ = '\\';
        break;
      case '\n':
        *p++ = 'n';
        break;
      case '\r':
        *p++ = 'r';
        break;
      case '\t':
        *p++ = 't';
        break;
      case '\b':
        *p++ = 'b';
        break;
      case '\f':
        *p++ = 'f';
        break;
      default: {
        static const char hex[] = "0123456789abcdef";
        std::memcpy(p, "u00", 3);
        p += 3;
        *p++ = hex[c >> 4];
        *p++ = hex[c & 15];
      }
      }
    }
    *p++ = '"';
    size_ += p - begin;
  }

  static constexpr int kMaxDepth = 32;
  std::string& out_;
  size_t size_; // the text written so far; out_ beyond it is room
  bool first_[kMaxDepth] = {}; // per open object or array: nothing written in it yet
  int depth_ = 0;
  bool afterKey_ = false;
};

} // namespace wavecast
