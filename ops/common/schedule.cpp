#include "ops/common/schedule.h"

#include <algorithm>

namespace spark {

long long stationary_m_chunks(long long blocks, long long tiles_m, long long resident) {
  // A CTA per (head, N block, M chunk).  Waves x tiles per chunk is the critical path in
  // tiles; take the fewest chunks within 5 % of its minimum, so the weights are copied
  // into shared memory as few times as possible.
  resident = std::max<long long>(resident, 1);
  const auto cost = [&](long long chunks) {
    const long long per_chunk = (tiles_m + chunks - 1) / chunks;
    return (blocks * chunks + resident - 1) / resident * per_chunk;
  };
  long long best_cost = cost(1);
  for (long long chunks = 2; chunks <= tiles_m; ++chunks) best_cost = std::min(best_cost, cost(chunks));
  for (long long chunks = 1;; ++chunks) {
    if (cost(chunks) * 20 > best_cost * 21) continue;
    // The same tiles per chunk with no empty chunk.
    const long long per_chunk = (tiles_m + chunks - 1) / chunks;
    return (tiles_m + per_chunk - 1) / per_chunk;
  }
}

}  // namespace spark
