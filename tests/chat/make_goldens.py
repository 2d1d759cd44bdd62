#!/usr/bin/env python3
"""Writes the golden outputs the chat template tests compare with, rendered by the real Jinja2 in
the environment transformers' apply_chat_template() renders in: ImmutableSandboxedEnvironment
with trim_blocks and lstrip_blocks, the loop controls extension, the {% generation %} tag,
raise_exception(), strftime_now() (here fixed to NOW, for outputs that do not change) and tojson
as json.dumps(ensure_ascii=False).

The test suite only reads what this writes; run it by hand after changing a template or a case:

    python3 tests/chat/make_goldens.py

Writes goldens/manifest.json (every case: template, tokens, messages, variables, and the golden
file or the error message expected), goldens/<template>.<case>.txt, and goldens/features.json
(small templates exercising the language, with their outputs).
"""

import json
import pathlib
import sys
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.exceptions import TemplateError
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = pathlib.Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
GOLDENS = HERE / "goldens"

# strftime_now() returns this moment in the goldens; the C++ test passes the same one.
NOW = datetime(2025, 3, 9, 14, 30, 5)


# ---- the environment, as transformers builds it (utils/chat_template_utils.py) ----------------

class AssistantTracker(Extension):
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        call = self.call_method("_generation_support")
        return nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _generation_support(self, caller):
        return caller()


def raise_exception(message):
    raise TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: NOW.strftime(fmt)
    return env


ENV = make_env()


def render(source, variables):
    """(output, None) or (None, error message)."""
    try:
        return ENV.from_string(source).render(**variables), None
    except TemplateError as e:
        return None, str(e)


# ---- conversations ------------------------------------------------------------------------------

def msg(role, content, **more):
    return {"role": role, "content": content, **more}


SYSTEM = msg("system", "You are a helpful assistant.")

COMMON = {
    "system_user": [SYSTEM, msg("user", "Hello!")],
    "user": [msg("user", "What is the capital of France?")],
    "multi_turn": [
        SYSTEM,
        msg("user", "Hi there"),
        msg("assistant", "Hello! How can I help?"),
        msg("user", "  Tell me a joke.  "),
        msg("assistant", " Why did the chicken cross the road?\n"),
        msg("user", "Another one,\nplease."),
    ],
    "no_system_multi_turn": [msg("user", "Hi"), msg("assistant", "Hello!"), msg("user", "How are you?")],
    "unicode": [msg("user", "Ünïcödé — 你好 😀 \"quotes\" 'apostrophes' {{ not_a_tag }} {% raw %} \\n\ttab")],
    "ends_with_assistant": [msg("user", "Hi"), msg("assistant", "Hello!")],
    "bad_order": [msg("user", "first"), msg("user", "second")],
}
# (conversation, add_generation_prompt) pairs every template renders.
COMMON_RUNS = [(name, True) for name in COMMON] + [("multi_turn", False), ("ends_with_assistant", False)]

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
WEATHER_CALL = {"type": "function", "function": {"name": "get_weather",
                                                 "arguments": {"city": "Paris", "unit": "celsius"}}}

TOKENS = {
    "llama2-chat": ("<s>", "</s>"),
    "llama3-instruct": ("<|begin_of_text|>", "<|eot_id|>"),
    "llama3.1-instruct": ("<|begin_of_text|>", "<|eot_id|>"),
    "llama3.2-instruct": ("<|begin_of_text|>", "<|eot_id|>"),
    "mistral-v0.1-instruct": ("<s>", "</s>"),
    "mistral-v0.3-instruct": ("<s>", "</s>"),
    "qwen2-instruct": ("", "<|im_end|>"),
    "qwen2.5-instruct": ("", "<|im_end|>"),
    "qwen3": ("", "<|im_end|>"),
    "smollm2-instruct": ("<|im_start|>", "<|im_end|>"),
    "phi3-mini-instruct": ("<s>", "<|endoftext|>"),
    "phi3.5-mini-instruct": ("<s>", "<|endoftext|>"),
    "gemma2-it": ("<bos>", "<eos>"),
    "gemma3-it": ("<bos>", "<eos>"),
    "zephyr": ("<s>", "</s>"),
    # openai/gpt-oss-20b's chat_template.jinja at its commit cbf31f6 (2025-08-08): the harmony format.
    "gpt-oss": ("<|startoftext|>", "<|return|>"),
}

# Cases particular to one template: (template, case name, messages, add_generation_prompt, extra).
SPECIAL = [
    ("llama3.1-instruct", "tools_in_user_message",
     [SYSTEM, msg("user", "What's the weather in Paris?")], True, {"tools": [WEATHER_TOOL]}),
    ("llama3.1-instruct", "tools_in_system",
     [msg("user", "What's the weather in Paris?")], True,
     {"tools": [WEATHER_TOOL], "tools_in_user_message": False}),
    ("llama3.1-instruct", "tool_call_and_result",
     [msg("user", "What's the weather in Paris?"),
      {"role": "assistant", "tool_calls": [WEATHER_CALL]},
      msg("tool", '{"temperature": 18, "sky": "clear"}'),
      msg("assistant", "It is 18 °C and clear.")], True, {"date_string": "01 Jan 2030"}),
    ("llama3.1-instruct", "builtin_tools",
     [msg("user", "Search the weather"),
      {"role": "assistant", "tool_calls": [{"function": {"name": "brave_search",
                                                         "arguments": {"query": "weather Paris"}}}]},
      msg("ipython", {"result": "sunny"})], True,
     {"builtin_tools": ["code_interpreter", "brave_search"]}),
    ("llama3.1-instruct", "tools_without_user",
     [SYSTEM], True, {"tools": [WEATHER_TOOL]}),
    ("llama3.1-instruct", "two_tool_calls",
     [msg("user", "Weather?"), {"role": "assistant", "tool_calls": [WEATHER_CALL, WEATHER_CALL]}],
     False, {}),
    ("qwen2.5-instruct", "tools_and_calls",
     [msg("user", "Weather in Paris and Rome?"),
      {"role": "assistant", "content": "Let me check.", "tool_calls": [
          WEATHER_CALL,
          {"function": {"name": "get_weather", "arguments": {"city": "Rome"}}}]},
      msg("tool", '{"temperature": 18}'),
      msg("tool", '{"temperature": 24}'),
      msg("assistant", "Paris 18 °C, Rome 24 °C.")], True, {"tools": [WEATHER_TOOL]}),
    ("qwen2.5-instruct", "system_and_tools",
     [SYSTEM, msg("user", "Hi")], True, {"tools": [WEATHER_TOOL]}),
    ("qwen3", "thinking_history",
     [msg("user", "Hi"),
      msg("assistant", "<think>\nThe user greets me.\n</think>\n\nHello!"),
      msg("user", "What is 2+2?"),
      msg("assistant", "<think>\nSimple sum.\n</think>\n\n4")], False, {}),
    ("qwen3", "enable_thinking_false",
     [msg("user", "What is 2+2?")], True, {"enable_thinking": False}),
    ("qwen3", "reasoning_content",
     [msg("user", "Why?"), msg("assistant", "Because.", reasoning_content="\nthinking hard\n")], False, {}),
    ("qwen3", "tools_multi_step",
     [SYSTEM, msg("user", "Weather in Paris?"),
      {"role": "assistant", "content": "", "tool_calls": [
          {"type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
      msg("tool", "18 degrees"),
      msg("assistant", "<think>\nI have the answer.\n</think>\n\nIt is 18 degrees.")],
     True, {"tools": [WEATHER_TOOL]}),
    ("mistral-v0.3-instruct", "tools_and_calls",
     [SYSTEM, msg("user", "Weather in Paris?"),
      {"role": "assistant", "tool_calls": [dict(WEATHER_CALL, id="abc123XYZ")]},
      {"role": "tool", "tool_call_id": "abc123XYZ", "content": '{"temperature": 18}'},
      msg("assistant", "18 degrees."),
      msg("user", "Thanks!")], True, {"tools": [WEATHER_TOOL]}),
    ("mistral-v0.3-instruct", "bad_tool_call_id",
     [msg("user", "Weather?"), {"role": "assistant", "tool_calls": [dict(WEATHER_CALL, id="short")]}],
     True, {}),
    ("gemma3-it", "content_parts",
     [{"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
      {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "  Describe this.  "}]},
      {"role": "assistant", "content": [{"type": "text", "text": "A cat."}]},
      msg("user", "Thanks")], True, {}),
    ("gpt-oss", "reasoning_effort_high",
     [SYSTEM, msg("user", "What is 2+2?")], True, {"reasoning_effort": "high"}),
    ("gpt-oss", "thinking_dropped_from_history",
     [msg("user", "Hi"), msg("assistant", "Hello!", thinking="The user greets me."),
      msg("user", "What is 2+2?")], True, {}),
    ("gpt-oss", "thinking_kept_in_last_turn",
     [msg("user", "Why?"), msg("assistant", "Because.", thinking="Think hard.")], False, {}),
    ("gpt-oss", "tools_and_call",
     [SYSTEM, msg("user", "Weather in Paris?"),
      {"role": "assistant", "thinking": "I should call the tool.", "tool_calls": [WEATHER_CALL]},
      msg("tool", '{"temperature": 18}')], True, {"tools": [WEATHER_TOOL]}),
    ("gpt-oss", "channel_tags_in_content",
     [msg("user", "Hi"), msg("assistant", "<|channel|>final<|message|>Hello")], True, {}),
    ("gemma3-it", "invalid_content",
     [msg("user", 5)], True, {}),
]


def is_simple(messages):
    return all(set(m) == {"role", "content"} and isinstance(m["content"], str) for m in messages)


def write_case(manifest, template, case, messages, add_generation_prompt, extra):
    source = (TEMPLATES / f"{template}.jinja").read_text(encoding="utf-8")
    bos, eos = TOKENS[template]
    variables = {"messages": messages, "tools": None, "documents": None,
                 "add_generation_prompt": add_generation_prompt,
                 "bos_token": bos, "eos_token": eos, **extra}
    output, error = render(source, variables)
    entry = {"name": f"{template}/{case}", "template": f"{template}.jinja", "bos_token": bos,
             "eos_token": eos, "add_generation_prompt": add_generation_prompt,
             "simple": is_simple(messages) and not extra, "messages": messages, "extra": extra}
    if error is not None:
        entry["error"] = error
    else:
        golden = f"{template}.{case}.txt"
        (GOLDENS / golden).write_bytes(output.encode("utf-8"))
        entry["expected"] = golden
    manifest.append(entry)


# ---- language features -------------------------------------------------------------------------

FEATURE_VARS = {
    "d": {"a": 1, "b": [1, 2]},
    "s": "hé",
    "l": [3, 1, 2],
    "n": None,
    "msgs": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
}

FEATURES = (HERE / "feature_cases.txt").read_text(encoding="utf-8").split("\n===\n")


def main():
    print(f"jinja2 {jinja2.__version__}", file=sys.stderr)
    GOLDENS.mkdir(exist_ok=True)
    for old in GOLDENS.glob("*.txt"):
        old.unlink()
    manifest = []
    for template in TOKENS:
        for case, add_generation_prompt in COMMON_RUNS:
            name = case if add_generation_prompt else f"{case}_no_generation_prompt"
            write_case(manifest, template, name, COMMON[case], add_generation_prompt, {})
    for template, case, messages, add_generation_prompt, extra in SPECIAL:
        write_case(manifest, template, case, messages, add_generation_prompt, extra)
    now = NOW.strftime("%Y-%m-%dT%H:%M:%S")
    (GOLDENS / "manifest.json").write_text(
        json.dumps({"now": now, "cases": manifest}, ensure_ascii=False, indent=1) + "\n",
        encoding="utf-8")

    features = []
    for source in FEATURES:
        if not source.strip():
            continue
        output, error = None, None
        try:
            output = ENV.from_string(source).render(**FEATURE_VARS)
        except Exception as e:  # any Jinja or Python error: the C++ engine must fail too
            error = f"{type(e).__name__}: {e}"
        case = {"template": source}
        if error is None:
            case["output"] = output
        else:
            case["error"] = error
        features.append(case)
    (GOLDENS / "features.json").write_text(
        json.dumps({"now": now, "variables": FEATURE_VARS, "cases": features},
                   ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    errors = sum("error" in c for c in manifest)
    print(f"{len(manifest)} chat cases ({errors} raising), {len(features)} feature cases",
          file=sys.stderr)


if __name__ == "__main__":
    main()
