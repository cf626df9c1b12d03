// Launch shapes that more than one op's schedules share.
#pragma once

namespace spark {

// The M chunks a weight-stationary launch splits each (head, column block) into: blocks of
// them, tiles_m M tiles, resident CTAs on the device at once.
long long stationary_m_chunks(long long blocks, long long tiles_m, long long resident);

}  // namespace spark
