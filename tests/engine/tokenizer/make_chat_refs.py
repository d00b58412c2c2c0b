#!/usr/bin/env python3
"""Renders extra chat-template references (reasoning, tool calls, tool responses, tools) with
the real Jinja chat_template of tests/data/qwen3-tokenizer/tokenizer_config.json, using jinja2 the
way transformers does (trim_blocks, lstrip_blocks, a `tojson` filter that is json.dumps with
ensure_ascii=False). encodings.json covers only plain conversations; this covers the rest.

  python3 make_chat_refs.py [TESTDATA_DIR (default tests/data)] > testdata/chat_template_refs.json
"""
import json
import os
import sys

import jinja2

testdata = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../data")
config = json.load(open(f"{testdata}/qwen3-tokenizer/tokenizer_config.json"))
env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
env.filters["tojson"] = lambda x, indent=None: json.dumps(x, ensure_ascii=False, indent=indent)
template = env.from_string(config["chat_template"])

weather = {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city, °C",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
conversations = [
    ("reasoning_in_content_before_last_query", [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "<think>\nadd them\n</think>\n\n4"},
        {"role": "user", "content": "and 3+3?"}], []),
    ("reasoning_in_content_after_last_query", [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "<think>\nadd them\n</think>\n\n4"}], []),
    ("reasoning_content_field", [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "\nhello", "reasoning_content": "\ngreet back\n"}], []),
    ("assistant_last_without_reasoning", [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"}], []),
    ("tool_call_and_responses", [
        {"role": "system", "content": "You help."},
        {"role": "user", "content": "Weather in Taipei and Tokyo?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"function": {"name": "get_weather", "arguments": "{\"city\": \"Taipei\"}"}},
            {"function": {"name": "get_weather", "arguments": "{\"city\": \"Tokyo\"}"}}]},
        {"role": "tool", "content": "28"},
        {"role": "tool", "content": "21"},
        {"role": "assistant", "content": "<think>\ncompare\n</think>\n\nTaipei 28, Tokyo 21.",
         "tool_calls": [{"function": {"name": "get_weather", "arguments": "{\"city\": \"Osaka\"}"}}]},
        {"role": "tool", "content": "25"}], [weather]),
    ("tools_without_system", [
        {"role": "user", "content": "Weather?"}], [weather]),
    ("system_in_the_middle", [
        {"role": "user", "content": "a"},
        {"role": "system", "content": "b"},
        {"role": "user", "content": "c"}], []),
]
out = {"generator": "tests/engine/tokenizer/make_chat_refs.py (jinja2 %s)" % jinja2.__version__,
       "cases": []}
for name, messages, tools in conversations:
    case = {"name": name, "messages": messages, "tools": tools}
    for key, extra in (("text", {}), ("text_nothink", {"enable_thinking": False}),
                       ("text_no_prompt", {"add_generation_prompt": False})):
        kwargs = {"messages": messages, "add_generation_prompt": True, **extra}
        if tools:
            kwargs["tools"] = tools
        case[key] = template.render(**kwargs)
    out["cases"].append(case)
json.dump(out, sys.stdout, ensure_ascii=False, indent=1)
print()
