#include "framework/clock.h"

#include <array>
#include <ctime>
#include <iomanip>
#include <sstream>
#include <stdexcept>

namespace cifar::op {
namespace {

// "2026-11-22T15:04:05" of the second `t` falls in.
std::string format_seconds(Clock::time_point t) {
  const std::time_t seconds = Clock::to_time_t(t);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  std::array<char, 32> text{};
  const auto n = std::strftime(text.data(), text.size(), "%Y-%m-%dT%H:%M:%S", &utc);
  return {text.data(), n};
}

}  // namespace

Time to_time(Clock::time_point t) { return std::chrono::time_point_cast<std::chrono::seconds>(t); }

std::string format_time(Clock::time_point t) { return format_seconds(t) + "Z"; }

Time parse_time(const std::string& text) {
  std::tm utc{};
  std::istringstream in(text);
  in >> std::get_time(&utc, "%Y-%m-%dT%H:%M:%S");
  if (in.fail()) throw std::invalid_argument("not an RFC 3339 time: '" + text + "'");
  return std::chrono::time_point_cast<std::chrono::seconds>(Clock::from_time_t(timegm(&utc)));
}

std::string format_micro_time(Clock::time_point t) {
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(
                          t - Clock::from_time_t(Clock::to_time_t(t)))
                          .count();
  std::ostringstream fraction;
  fraction << '.' << std::setw(6) << std::setfill('0') << micros << 'Z';
  return format_seconds(t) + fraction.str();
}

}  // namespace cifar::op
