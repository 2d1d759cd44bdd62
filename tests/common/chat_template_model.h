#pragma once
// A copy of a GGUF model whose metadata carries a chat template (tokenizer.chat_template): the
// demo model made a "chat" model for the tests of chat formatting (the app's and the engine's).

#include <cstring>
#include <span>
#include <string>

#include "core/formats/gguf.h"

namespace spillway::testing_support {

// A ChatML template (as Qwen's and many fine-tunes' GGUFs carry).
inline const std::string kChatMlTemplate =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
    "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

// Writes `source` to `out` with `chatTemplate` added; false when either file fails.
inline bool writeWithChatTemplate(const std::string& source, const std::string& out, const std::string& chatTemplate)
{
    auto file = gguf::File::open(source);
    if (!file) return false;
    gguf::Writer w((*file)->alignment());
    for (const auto& kv : (*file)->metadata()) w.setValue(kv.key, kv.value);
    w.setString("tokenizer.chat_template", chatTemplate);
    for (const auto& t : (*file)->tensors()) {
        const uint8_t* data = t.data;
        const uint64_t bytes = t.bytes;
        w.addTensor(t.name, t.type, t.dims, [data, bytes](std::span<uint8_t> dst) { std::memcpy(dst.data(), data, bytes); });
    }
    return w.write(out).ok();
}

}  // namespace spillway::testing_support
