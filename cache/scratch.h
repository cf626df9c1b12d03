// Names of temporaries (entry builds in .tmp/, eviction victims in .trash/, stats
// updates) that record their owner: a short tag of the host (name and pid namespace) and
// the pid.  A process killed mid-build leaves its temporary behind; the owner in the name
// tells such a leftover from another process's work in progress.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <string_view>

namespace spark {

// "<base>.<host tag>-<pid>-<random>"
std::string scratch_name(std::string_view base);

// True when the item's owner is a process of this host that no longer exists, or when
// the item is older than max_age (an owner on another host sharing the cache cannot be
// asked; no compile takes that long).  Names without an owner are judged by age alone.
bool scratch_is_abandoned(const std::filesystem::path& item, std::chrono::seconds max_age);

inline constexpr std::chrono::seconds kScratchMaxAge{3600};

}  // namespace spark
