// The text form of an op's tuning override: comma-separated "LO-HI:<tile>" items whose M
// ranges split 1..max_m into regimes (SPARK_REGIMES for the query projection,
// SPARK_OPROJ_TILES for the value up-projection).  Each op reads its own tiles; the ranges,
// the numbers and the messages are shared.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <string_view>
#include <vector>

#include "ops/common/formats.h"

namespace spark {

// One item, read left to right.  A number is plain decimal digits (no sign, no space), read
// by from_chars and held to its field's range as it is read, so no rule after it divides by
// zero or multiplies past int (sscanf's %d checked neither: a number out of int's range is
// undefined behaviour for it, and glibc kept its low 32 bits).  Every failure throws
// INVALID_ARGUMENT naming `where` and the item; a malformed one also quotes `grammar`.
class ItemReader {
 public:
  ItemReader(std::string_view item, std::string where, std::string_view grammar)
      : item_(item), rest_(item), where_(std::move(where)), grammar_(grammar) {}

  // "<where>: '<item>'", as messages start.
  std::string item() const;
  // Consumes `literal` where the rest starts with it.
  bool take(std::string_view literal);
  void expect(std::string_view literal);
  // The number of field `name`, in lo..hi.
  int number(std::string_view name, int lo, int hi);
  void expect_end();

 private:
  [[noreturn]] void malformed(std::string_view wanted) const;

  std::string_view item_;
  std::string_view rest_;
  std::string where_;
  std::string_view grammar_;
};

// Splits `text` at commas into "LO-HI:<tile>" items whose ranges run contiguously from 1 to
// max_m, calls read_tile on each item's reader just past the colon (it reads the tile to
// the item's end and keeps it), and returns the regimes in order.  Messages start with
// `where` (the variable's name).
std::vector<MRegime> read_regime_items(std::string_view text, std::string_view where, std::string_view grammar,
                                       int max_m, const std::function<void(ItemReader&)>& read_tile);

// The same, each regime paired with the tile read_tile returns for it: Entry is an aggregate
// {MRegime regime; Tile tile;}.
template <class Entry, class ReadTile>
std::vector<Entry> read_regime_table(std::string_view text, std::string_view where, std::string_view grammar,
                                     int max_m, ReadTile read_tile) {
  std::vector<decltype(read_tile(std::declval<ItemReader&>()))> tiles;
  const std::vector<MRegime> regimes =
      read_regime_items(text, where, grammar, max_m, [&](ItemReader& r) { tiles.push_back(read_tile(r)); });
  std::vector<Entry> table;
  for (size_t i = 0; i < regimes.size(); ++i) table.push_back({regimes[i], tiles[i]});
  return table;
}

}  // namespace spark
