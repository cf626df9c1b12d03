// Names of temporaries (entry builds in .tmp/, eviction victims in .trash/, entries moved
// aside in .corrupt/, stats updates, imports) that record their owner: a short tag of the
// host (name and pid namespace) and the pid.  A process killed mid-build leaves its
// temporary behind; the owner in the name tells such a leftover from another process's work
// in progress, and the pattern itself tells spark's temporaries from anything else: the
// clean-up removes only names of this form.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "core/dir.h"

namespace spark {

// "<base>.<8 hex host tag>-<pid>-<12 hex random>"
std::string scratch_name(std::string_view base);
// True for a name scratch_name() makes; `base` (when given) gets its base.
bool is_scratch_name(std::string_view name, std::string* base = nullptr);

// True when the item `name` in `dir` is a scratch name whose owner is a process of this
// host that no longer exists, or which is older than max_age (an owner on another host
// sharing the cache cannot be asked; no compile takes that long).
bool scratch_is_abandoned(const Dir& dir, std::string_view name, std::chrono::seconds max_age);

inline constexpr std::chrono::seconds kScratchMaxAge{3600};

}  // namespace spark
