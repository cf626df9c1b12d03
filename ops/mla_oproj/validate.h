// Host-side checks of an oproj descriptor and of one call's arguments (spark.h's rules).
// Each failure throws spark::Error whose message starts with "argument '<name>': ".
#pragma once

#include "spark/spark.h"

namespace spark::oproj {

// struct_size, enum values, and the supported H/L/V (UNSUPPORTED when well-formed but not
// implemented).
void validate_desc(const spark_mla_oproj_desc* desc);

// Every rule of spark_mla_oproj_args for desc (already validated), with M <= max_m.
void validate_args(const spark_mla_oproj_desc& desc, const spark_mla_oproj_args* args, int max_m);

}  // namespace spark::oproj
