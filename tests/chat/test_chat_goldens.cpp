// Real chat templates (Llama 2/3/3.1/3.2, Mistral v0.1/v0.3, Qwen2/2.5/3, SmolLM2, Phi-3/3.5,
// Gemma 2/3, Zephyr) rendered byte for byte as Python's Jinja2 renders them in transformers'
// environment, and ~200 small templates exercising the language. The expected outputs come from
// make_goldens.py.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "chat_test_util.h"
#include "core/chat/chat_template.h"

namespace spillway::chat {
namespace {

using nlohmann::ordered_json;
using test::chatTestDir;
using test::readFile;

ordered_json loadJson(const std::string& path)
{
    ordered_json j = ordered_json::parse(readFile(path), nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << path;
    return j;
}

TEST(ChatGoldens, RealTemplatesRenderByteForByte)
{
    const ordered_json manifest = loadJson(chatTestDir() + "/goldens/manifest.json");
    ASSERT_TRUE(manifest.contains("cases"));
    const std::tm now = test::parseNow(manifest["now"].get<std::string>());
    int checked = 0;
    for (const auto& c : manifest["cases"]) {
        const std::string name = c["name"].get<std::string>();
        SCOPED_TRACE(name);
        const std::string source =
            readFile(chatTestDir() + "/templates/" + c["template"].get<std::string>());
        ASSERT_FALSE(source.empty());
        auto tmpl = ChatTemplate::parse(source);
        ASSERT_TRUE(tmpl.ok()) << tmpl.error().message;

        ChatTemplateOptions options;
        options.bosToken = c["bos_token"].get<std::string>();
        options.eosToken = c["eos_token"].get<std::string>();
        options.addGenerationPrompt = c["add_generation_prompt"].get<bool>();
        options.now = now;
        auto extra = jinja::Value::fromJson(c["extra"].dump());
        ASSERT_TRUE(extra.ok()) << extra.error().message;
        options.extraVariables = *extra;

        Result<std::string> out = makeError(ErrorCode::Internal, "not rendered");
        if (c["simple"].get<bool>()) {
            // Plain role/content conversations go through the ChatMessage interface.
            std::vector<ChatMessage> messages;
            for (const auto& m : c["messages"])
                messages.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
            out = tmpl->render(messages, options);
        } else {
            auto messages = jinja::Value::fromJson(c["messages"].dump());
            ASSERT_TRUE(messages.ok()) << messages.error().message;
            out = tmpl->render(*messages, options);
        }
        if (c.contains("error")) {
            ASSERT_FALSE(out.ok()) << "expected the template to raise: " << c["error"];
            EXPECT_EQ(out.error().code, ErrorCode::InvalidArgument);
            EXPECT_NE(out.error().message.find(c["error"].get<std::string>()), std::string::npos)
                << out.error().message;
            EXPECT_NE(out.error().message.find("raised"), std::string::npos) << out.error().message;
        } else {
            ASSERT_TRUE(out.ok()) << out.error().message;
            const std::string expected =
                readFile(chatTestDir() + "/goldens/" + c["expected"].get<std::string>());
            EXPECT_EQ(*out, expected);
        }
        ++checked;
    }
    EXPECT_GE(checked, 150);
}

TEST(ChatGoldens, LanguageFeaturesMatchJinja2)
{
    const ordered_json features = loadJson(chatTestDir() + "/goldens/features.json");
    ASSERT_TRUE(features.contains("variables") && features.contains("cases"));
    const std::string variables = features["variables"].dump();
    int checked = 0;
    for (const auto& c : features["cases"]) {
        const std::string source = c["template"].get<std::string>();
        SCOPED_TRACE(source);
        const std::string out = test::renderOrError(source, variables);
        if (c.contains("error")) {
            EXPECT_EQ(out.rfind("ERROR: ", 0), 0u)
                << "Jinja2 fails with " << c["error"] << ", we gave: " << out;
        } else {
            EXPECT_EQ(out, c["output"].get<std::string>());
        }
        ++checked;
    }
    EXPECT_GE(checked, 190);
}

}  // namespace
}  // namespace spillway::chat
