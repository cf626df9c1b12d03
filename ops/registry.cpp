// The ops linked into spark, for the one question the core asks of them (core/key_name.h):
// is this name a key of an op spark has, exactly as that op prints it?
#include "core/key_name.h"
#include "ops/mla_oproj/key.h"
#include "ops/mla_qproj/key.h"

namespace spark {

bool is_op_key_name(std::string_view name) noexcept {
  if (!is_key_name(name)) return false;
  const std::string_view op = key_op(name);
  if (op == "mla_qproj") return is_canonical_key_name(name);
  if (op == oproj::kOp) return oproj::is_canonical_key_name(name);
  return false;
}

}  // namespace spark
