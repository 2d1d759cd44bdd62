// Compiled as part of core/plan, which core/runtime uses (it executes the plan's placements):
// the session's header must not be found here.
#include "core/plan/placement.h"
#include "core/runtime/llama_session.h"
int layeringProbe() { return 0; }
