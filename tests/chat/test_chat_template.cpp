// The chat layer: ChatTemplate with ChatMessage lists or message values, the variables it passes
// (as transformers' apply_chat_template does), and the template and tokens from GGUF metadata.

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "chat_test_util.h"
#include "core/chat/chat_template.h"
#include "core/formats/gguf.h"

namespace spillway::chat {
namespace {

using test::chatTestDir;
using test::readFile;

const std::vector<ChatMessage> kConversation = {
    {"system", "Be brief."},
    {"user", "Hi"},
    {"assistant", "Hello!"},
    {"user", "Bye"},
};

TEST(ChatTemplate, RendersMessagesWithTokensAndGenerationPrompt)
{
    auto t = ChatTemplate::parse(readFile(chatTestDir() + "/templates/llama3-instruct.jinja"));
    ASSERT_TRUE(t.ok()) << t.error().message;
    ChatTemplateOptions options;
    options.bosToken = "<|begin_of_text|>";
    options.eosToken = "<|eot_id|>";
    auto out = t->render(std::span(kConversation).subspan(0, 2), options);
    ASSERT_TRUE(out.ok()) << out.error().message;
    EXPECT_EQ(*out,
              "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
              "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
              "<|start_header_id|>assistant<|end_header_id|>\n\n");
    options.addGenerationPrompt = false;
    out = t->render(std::span(kConversation).subspan(0, 2), options);
    ASSERT_TRUE(out.ok()) << out.error().message;
    EXPECT_EQ(out->find("assistant"), std::string::npos);
}

TEST(ChatTemplate, PassesTheVariablesTransformersDoes)
{
    const char* source =
        "{{ tools is none }} {{ documents is none }} {{ add_generation_prompt }} [{{ bos_token }}]"
        "[{{ eos_token }}] {{ messages|length }} {{ messages[0].role }} {{ enable_thinking }}";
    ChatTemplateOptions options;
    options.bosToken = "<s>";
    auto thinking = jinja::Value::fromJson(R"({"enable_thinking": false})");
    ASSERT_TRUE(thinking.ok()) << thinking.error().message;
    options.extraVariables = *thinking;
    auto out = renderChatTemplate(source, kConversation, options);
    ASSERT_TRUE(out.ok()) << out.error().message;
    EXPECT_EQ(*out, "True True True [<s>][] 4 system False");

    // Extra variables replace the defaults.
    auto extra = jinja::Value::fromJson(R"({"tools": [{"name": "f"}], "bos_token": "B"})");
    ASSERT_TRUE(extra.ok()) << extra.error().message;
    options.extraVariables = *extra;
    out = renderChatTemplate("{{ tools[0].name }} {{ bos_token }}", kConversation, options);
    ASSERT_TRUE(out.ok()) << out.error().message;
    EXPECT_EQ(*out, "f B");
}

TEST(ChatTemplate, RichMessagesAsValues)
{
    auto t = ChatTemplate::parse(readFile(chatTestDir() + "/templates/qwen3.jinja"));
    ASSERT_TRUE(t.ok()) << t.error().message;
    auto messages = jinja::Value::fromJson(R"([
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4", "reasoning_content": "add them"}])");
    ASSERT_TRUE(messages.ok()) << messages.error().message;
    ChatTemplateOptions options;
    options.addGenerationPrompt = false;
    auto out = t->render(*messages, options);
    ASSERT_TRUE(out.ok()) << out.error().message;
    EXPECT_EQ(*out,
              "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n<think>\nadd "
              "them\n</think>\n\n4<|im_end|>\n");
    EXPECT_FALSE(t->render(jinja::Value(5), options).ok());
    options.extraVariables = jinja::Value("not a dict");
    EXPECT_FALSE(t->render(*messages, options).ok());
}

TEST(ChatTemplate, ErrorsSayChatTemplate)
{
    auto t = ChatTemplate::parse("{% for m in messages %}");
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.error().code, ErrorCode::InvalidArgument);
    EXPECT_EQ(t.error().message.rfind("chat template syntax error at line 1", 0), 0u)
        << t.error().message;

    auto out = renderChatTemplate(readFile(chatTestDir() + "/templates/gemma2-it.jinja"),
                                  kConversation, {});
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.error().message.rfind("chat template raised an error at line 1", 0), 0u)
        << out.error().message;
    EXPECT_NE(out.error().message.find("System role not supported"), std::string::npos);
}

TEST(ChatTemplate, RendersOnManyThreadsAtOnce)
{
    auto t = ChatTemplate::parse(readFile(chatTestDir() + "/templates/llama3.1-instruct.jinja"));
    ASSERT_TRUE(t.ok()) << t.error().message;
    ChatTemplateOptions options;
    options.bosToken = "<|begin_of_text|>";
    auto first = t->render(kConversation, options);
    ASSERT_TRUE(first.ok()) << first.error().message;
    const std::string expected = *first;
    std::vector<std::thread> threads;
    std::vector<int> mismatches(4, 0);
    for (int i = 0; i < 4; ++i) {
        threads.emplace_back([&, i] {
            for (int k = 0; k < 50; ++k) {
                auto out = t->render(kConversation, options);
                if (!out.ok() || *out != expected) ++mismatches[static_cast<size_t>(i)];
            }
        });
    }
    for (auto& th : threads) th.join();
    for (int m : mismatches) EXPECT_EQ(m, 0);
}

gguf::Metadata metadataWith(bool withTemplate, int64_t bosId, int64_t eosId)
{
    gguf::Metadata m("model.gguf");
    if (withTemplate)
        m.add({"tokenizer.chat_template",
               gguf::Value::ofString("{{ bos_token }}{% for m in messages %}"
                                     "{{ m.content }}{{ eos_token }}{% endfor %}")});
    std::vector<gguf::Value> tokens;
    for (const char* text : {"<unk>", "<s>", "</s>", "hello"})
        tokens.push_back(gguf::Value::ofString(text));
    m.add({"tokenizer.ggml.tokens",
           gguf::Value::ofArray(gguf::ValueType::String, std::move(tokens))});
    if (bosId >= 0)
        m.add({"tokenizer.ggml.bos_token_id",
               gguf::Value::ofUInt(gguf::ValueType::UInt32, static_cast<uint64_t>(bosId))});
    if (eosId >= 0)
        m.add({"tokenizer.ggml.eos_token_id",
               gguf::Value::ofUInt(gguf::ValueType::UInt32, static_cast<uint64_t>(eosId))});
    return m;
}

TEST(ChatTemplate, FromGgufMetadata)
{
    auto t = chatTemplateFromMetadata(metadataWith(true, 1, 2));
    ASSERT_TRUE(t.ok()) << t.error().message;
    EXPECT_EQ(t->bosToken, "<s>");
    EXPECT_EQ(t->eosToken, "</s>");
    auto out = renderChatTemplate(t->source, kConversation, t->options(false));
    ASSERT_TRUE(out.ok()) << out.error().message;
    EXPECT_EQ(*out, "<s>Be brief.</s>Hi</s>Hello!</s>Bye</s>");

    auto noIds = chatTemplateFromMetadata(metadataWith(true, -1, -1));
    ASSERT_TRUE(noIds.ok()) << noIds.error().message;
    EXPECT_EQ(noIds->bosToken, "");

    auto missing = chatTemplateFromMetadata(metadataWith(false, 1, 2));
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.error().code, ErrorCode::UnsupportedModel);
    EXPECT_NE(missing.error().message.find("tokenizer.chat_template"), std::string::npos);

    auto badId = chatTemplateFromMetadata(metadataWith(true, 1, 99));
    ASSERT_FALSE(badId.ok());
    EXPECT_EQ(badId.error().code, ErrorCode::ModelFileInvalid);
    EXPECT_NE(badId.error().message.find("tokenizer.ggml.eos_token_id 99"), std::string::npos)
        << badId.error().message;
}

}  // namespace
}  // namespace spillway::chat
