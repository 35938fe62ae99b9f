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

// A time in milliseconds, written to the nanosecond (at most six decimals): fixed-point
// text made with integer formatting, several times faster than a double's shortest
// round-trip form and half as long, and finer than any kernel time.
struct Milliseconds {
  double value;
};

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

  void write(Milliseconds ms) {
    const double value = ms.value;
    if (!std::isfinite(value) || std::abs(value) >= 9e12) { // past int64 nanoseconds
      write(value);
      return;
    }
    const double scaled = value * 1e6;
    const auto nanoseconds = static_cast<int64_t>(scaled < 0 ? scaled - 0.5 : scaled + 0.5);
    const uint64_t magnitude =
        nanoseconds < 0 ? uint64_t(0) - uint64_t(nanoseconds) : uint64_t(nanoseconds);
    char* const begin = room(32);
    char* p = begin;
    if (nanoseconds < 0)
      *p++ = '-';
    p = std::to_chars(p, p + 24, magnitude / 1000000).ptr;
    *p++ = '.';
    // Six fraction digits, two at a time; trailing zeros dropped, one digit kept.
    static constexpr char kPairs[] = "00010203040506070809101112131415161718192021222324"
                                     "25262728293031323334353637383940414243444546474849"
                                     "50515253545556575859606162636465666768697071727374"
                                     "75767778798081828384858687888990919293949596979899";
    const auto fraction = static_cast<uint32_t>(magnitude % 1000000);
    std::memcpy(p, kPairs + 2 * (fraction / 10000), 2);
    std::memcpy(p + 2, kPairs + 2 * (fraction / 100 % 100), 2);
    std::memcpy(p + 4, kPairs + 2 * (fraction % 100), 2);
    int kept = 6;
    while (kept > 1 && p[kept - 1] == '0')
      --kept;
    size_ += p + kept - begin;
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
