#include "ops/common/regime_text.h"

#include <charconv>

#include "core/error.h"

namespace spark {

std::string ItemReader::item() const { return fmt::format("{}: '{}'", where_, item_); }

bool ItemReader::take(std::string_view literal) {
  if (rest_.substr(0, literal.size()) != literal) return false;
  rest_.remove_prefix(literal.size());
  return true;
}

void ItemReader::expect(std::string_view literal) {
  if (!take(literal)) malformed(fmt::format("'{}'", literal));
}

int ItemReader::number(std::string_view name, int lo, int hi) {
  size_t digits = 0;
  while (digits < rest_.size() && rest_[digits] >= '0' && rest_[digits] <= '9') ++digits;
  if (digits == 0) malformed(name);
  const std::string_view text = rest_.substr(0, digits);
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  SPARK_CHECK(ec == std::errc() && value >= lo && value <= hi, SPARK_ERROR_INVALID_ARGUMENT,
              "{}: {} is {}, outside {}..{}", item(), name, text, lo, hi);
  rest_.remove_prefix(digits);
  return value;
}

void ItemReader::expect_end() {
  if (!rest_.empty()) malformed("the end of the item");
}

void ItemReader::malformed(std::string_view wanted) const {
  SPARK_FAIL(SPARK_ERROR_INVALID_ARGUMENT, "{} is not {}: expected {} {}", item(), grammar_, wanted,
             rest_.empty() ? std::string("at its end") : fmt::format("at '{}'", rest_));
}

std::vector<MRegime> read_regime_items(std::string_view text, std::string_view where, std::string_view grammar,
                                       int max_m, const std::function<void(ItemReader&)>& read_tile) {
  std::vector<MRegime> regimes;
  for (size_t start = 0;;) {
    const size_t comma = text.find(',', start);
    const std::string_view item = text.substr(start, comma == std::string_view::npos ? comma : comma - start);
    SPARK_CHECK(!item.empty(), SPARK_ERROR_INVALID_ARGUMENT, "{}: item {} of '{}' is empty", where,
                regimes.size() + 1, text);
    SPARK_CHECK(regimes.empty() || regimes.back().m_max < max_m, SPARK_ERROR_INVALID_ARGUMENT,
                "{}: '{}' comes after the regime that ends at M = {}", where, item, max_m);
    const int expected_min = regimes.empty() ? 1 : regimes.back().m_max + 1;
    ItemReader r(item, std::string(where), grammar);
    MRegime regime;
    regime.m_min = r.number("LO", 1, max_m);
    r.expect("-");
    regime.m_max = r.number("HI", 1, max_m);
    r.expect(":");
    SPARK_CHECK(regime.m_min == expected_min, SPARK_ERROR_INVALID_ARGUMENT, "{}: regime '{}' must start at M = {}",
                where, item, expected_min);
    SPARK_CHECK(regime.m_max >= regime.m_min, SPARK_ERROR_INVALID_ARGUMENT, "{}: regime '{}' is empty: HI {} is below LO {}",
                where, item, regime.m_max, regime.m_min);
    read_tile(r);
    regimes.push_back(regime);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  SPARK_CHECK(regimes.back().m_max == max_m, SPARK_ERROR_INVALID_ARGUMENT, "{}: the regimes must end at M = {}",
              where, max_m);
  return regimes;
}

}  // namespace spark
