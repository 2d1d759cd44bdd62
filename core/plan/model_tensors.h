#pragma once
// The weight matrices of a model as the planner and runtime see them: name, streaming unit and
// size. Norm vectors are not listed: they always stay on the device (a few KiB per layer).

#include <vector>

#include "core/model/llama_model.h"
#include "core/plan/placement.h"

namespace spillway::plan {

// Every weight matrix of `model`, all on the device, in file order within each unit. The token
// embedding is unit -1 unless it is tied to the output head, then it is the head's unit.
std::vector<TensorPlacement> modelTensors(const LlamaModel& model);

// The placement that keeps every weight matrix on `tier`.
Placement uniformPlacement(const LlamaModel& model, Tier tier);

}  // namespace spillway::plan
