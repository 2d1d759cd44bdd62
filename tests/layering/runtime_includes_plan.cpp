// Control: core/runtime may include core/plan, core/compress and core/model, so this must build.
#include "core/compress/ffn_predictor.h"
#include "core/model/llama_model.h"
#include "core/plan/placement.h"
#include "core/runtime/llama_session.h"
int layeringProbe() { return 0; }
