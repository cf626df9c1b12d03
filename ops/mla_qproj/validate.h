// Host-side checks of a descriptor and of one call's arguments (spark.h's rules).
// Each failure throws spark::Error whose message starts with "argument '<name>': ".
#pragma once

#include "core/c_enum.h"
#include "ops/mla_qproj/key.h"
#include "spark/spark.h"

namespace spark {

// struct_size, enum values, and the supported H/K/N/R (UNSUPPORTED when well-formed
// but not implemented).
void validate_desc(const spark_mla_qproj_desc* desc);

// Every rule of spark_mla_qproj_args for desc (already validated), with M <= max_m.
void validate_args(const spark_mla_qproj_desc& desc, const spark_mla_qproj_args* args, int max_m);

}  // namespace spark
