#pragma once
// Two models hold the same tensors: the same names, dims and bytes (a conversion and its way
// back; a Hugging Face folder written from a GGUF and read again).

#include <gtest/gtest.h>

#include <cstring>

#include "core/model/llama_model.h"

namespace spillway::testing_support {

inline void expectSameTensors(const LlamaModel& got, const LlamaModel& want)
{
    ASSERT_EQ(got.tensors().size(), want.tensors().size());
    for (const ModelTensor& t : want.tensors()) {
        const ModelTensor* g = got.tensor(t.name);
        ASSERT_NE(g, nullptr) << t.name;
        EXPECT_EQ(g->dims, t.dims) << t.name;
        ASSERT_EQ(g->bytes, t.bytes) << t.name;
        EXPECT_EQ(0, std::memcmp(g->data, t.data, t.bytes)) << t.name;
    }
}

}  // namespace spillway::testing_support
