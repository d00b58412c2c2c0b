// Tool calls through the official OpenAI SDK against a real `tandem-infer serve` (cpu backend,
// random-weight qwen3moe-tiny with the real Qwen3 tokenizer): tool_choice required / named /
// none / auto, parallel_tool_calls, streamed calls gathered by the SDK's own stream helper, tool
// results sent back, and the 400s of malformed tools and messages. With random weights a call
// only comes because the forced choices constrain the output to the template's call format; the
// same runs once more on a model folder whose template writes the Qwen3.5 / Coder XML format.
// Env: TANDEM_INFER_BIN (the binary, set by CTest), TANDEM_TESTDATA (reference data).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';
import { startTinyServer, stopTinyServer } from './serve_fixture.mjs';

const MODEL = 'tiny-tools';
const servers = {};  // format -> { server, dir, client }

// The part of a Qwen3.5 / Qwen3-Coder template that matters here: tools listed, calls written
// as <function=...><parameter=...> blocks, tool results as <tool_response>.
const XML_TEMPLATE = `{%- if tools %}<|im_start|>system
<tools>
{%- for tool in tools %}
{{ tool | tojson }}
{%- endfor %}
</tools>
Call a tool as <tool_call>
<function=NAME>
<parameter=ARG>
VALUE
</parameter>
</function>
</tool_call><|im_end|>
{% endif %}
{%- for m in messages %}
{%- if m.role == "assistant" and m.tool_calls %}<|im_start|>assistant
{{ m.content }}
{%- for tc in m.tool_calls %}
<tool_call>
<function={{ tc.function.name }}>
{%- for k, v in tc.function.arguments.items() %}
<parameter={{ k }}>
{{ v }}
</parameter>
{%- endfor %}
</function>
</tool_call>
{%- endfor %}<|im_end|>
{% elif m.role == "tool" %}<|im_start|>user
<tool_response>
{{ m.content }}
</tool_response><|im_end|>
{% else %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}`;

before(async () => {
  for (const format of ['json', 'xml']) {
    const prepare = format === 'xml' ? (dir) => fs.writeFileSync(path.join(dir, 'chat_template.jinja'), XML_TEMPLATE) : null;
    servers[format] = await startTinyServer(MODEL, { prepare });
  }
});

after(async () => {
  for (const tiny of Object.values(servers)) await stopTinyServer(tiny);
});

const weather = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather of a city',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string', maxLength: 24 }, days: { type: 'integer' } },
      required: ['city', 'days'],
      additionalProperties: false,
    },
  },
};
const clock = { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: {}, additionalProperties: false } } };
const ask = [{ role: 'user', content: 'What is the weather in Paris for the next 3 days?' }];
const base = { model: MODEL, messages: ask, tools: [weather, clock], max_tokens: 120, temperature: 0,
               chat_template_kwargs: { enable_thinking: false } };

// A call of `tool` whose arguments hold what its schema requires, with the right types.
function checkCall(call, tools) {
  assert.equal(call.type, 'function');
  assert.match(call.id, /^call_[A-Za-z0-9]+$/);
  const tool = tools.find((t) => t.function.name === call.function.name);
  assert.ok(tool, `a call of an offered tool, got ${call.function.name}`);
  const args = JSON.parse(call.function.arguments);
  const schema = tool.function.parameters;
  for (const key of schema.required ?? []) assert.ok(key in args, `argument ${key} of ${call.function.name}`);
  for (const [key, value] of Object.entries(args)) {
    const type = schema.properties[key]?.type;
    assert.ok(type, `no argument ${key} outside the schema`);
    if (type === 'integer') assert.ok(Number.isInteger(value), `${key}: ${value}`);
    if (type === 'string') assert.ok(typeof value === 'string' && value.length <= 24, `${key}: ${value}`);
  }
}

for (const format of ['json', 'xml']) {
  test(`${format}: tool_choice required and a named function give valid calls even with random weights`, async () => {
    const { client } = servers[format];
    const res = await client.chat.completions.create({ ...base, tool_choice: 'required' });
    const msg = res.choices[0].message;
    console.log(`${format} required: ${JSON.stringify(msg.tool_calls)}`);
    assert.equal(res.choices[0].finish_reason, 'tool_calls');
    assert.equal(msg.content, null);
    assert.ok(msg.tool_calls.length >= 1);
    for (const call of msg.tool_calls) checkCall(call, [weather, clock]);

    const named = await client.chat.completions.create({
      ...base, tool_choice: { type: 'function', function: { name: 'get_weather' } } });
    const calls = named.choices[0].message.tool_calls;
    console.log(`${format} named: ${JSON.stringify(calls)}`);
    assert.equal(calls.length, 1);
    assert.equal(calls[0].function.name, 'get_weather');
    checkCall(calls[0], [weather]);

    const one = await client.chat.completions.create({ ...base, tool_choice: 'required', parallel_tool_calls: false });
    assert.equal(one.choices[0].message.tool_calls.length, 1);
  });

  test(`${format}: a streamed call, gathered by the SDK, equals the whole response's`, async () => {
    const { client } = servers[format];
    const params = { ...base, tool_choice: { type: 'function', function: { name: 'get_weather' } } };
    const whole = await client.chat.completions.create(params);
    const stream = client.beta.chat.completions.stream({ ...params, stream: true });
    let argumentDeltas = 0;
    stream.on('tool_calls.function.arguments.delta', () => { argumentDeltas += 1; });
    const final = await stream.finalChatCompletion();
    const got = final.choices[0].message.tool_calls;
    const want = whole.choices[0].message.tool_calls;
    assert.equal(got.length, 1);
    assert.equal(got[0].function.name, want[0].function.name);
    assert.equal(got[0].function.arguments, want[0].function.arguments);
    assert.match(got[0].id, /^call_/);
    assert.equal(final.choices[0].finish_reason, 'tool_calls');
    assert.ok(argumentDeltas >= 1);
  });

  test(`${format}: tool results go back through the template`, async () => {
    const { client } = servers[format];
    const first = await client.chat.completions.create({ ...base, tool_choice: 'required', parallel_tool_calls: false });
    const assistant = first.choices[0].message;  // sent back as the SDK returned it
    const call = assistant.tool_calls[0];
    const messages = [...ask, assistant, { role: 'tool', tool_call_id: call.id, content: '{"temperature": 21}' }];
    const withResult = await client.chat.completions.create({ ...base, messages, max_tokens: 4 });
    const without = await client.chat.completions.create({ ...base, messages: [...ask, assistant], max_tokens: 4 });
    // The result's text is in the prompt: more prompt tokens by at least its own.
    assert.ok(withResult.usage.prompt_tokens >= without.usage.prompt_tokens + 5,
      `${withResult.usage.prompt_tokens} vs ${without.usage.prompt_tokens}`);
    assert.ok(['stop', 'length', 'tool_calls'].includes(withResult.choices[0].finish_reason));
  });
}

test('tool_choice none and auto: random weights write text, which none does not read for calls', async () => {
  const { client } = servers.json;
  const none = await client.chat.completions.create({ ...base, tool_choice: 'none', max_tokens: 8, ignore_eos: true });
  assert.equal(typeof none.choices[0].message.content, 'string');
  assert.equal(none.choices[0].message.tool_calls, undefined);
  assert.equal(none.choices[0].finish_reason, 'length');
  const auto = await client.chat.completions.create({ ...base, tool_choice: 'auto', max_tokens: 8, ignore_eos: true });
  assert.equal(auto.choices[0].message.content, none.choices[0].message.content);  // greedy, same prompt
});

test('malformed tools, tool_choice and messages are 400s naming the field', async () => {
  const { client } = servers.json;
  for (const [extra, param] of [
    [{ tool_choice: { type: 'function', function: { name: 'nope' } } }, 'tool_choice'],
    [{ tools: [{ type: 'function', function: { name: 'bad name' } }] }, 'tools[0].function.name'],
    [{ tools: [{ type: 'retrieval' }] }, 'tools[0].type'],
    [{ tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { a: { type: 'string', format: 'date' } } } } }],
       tool_choice: 'required' }, 'tools[0].function.parameters'],
    [{ messages: [...ask, { role: 'tool', content: 'x', tool_call_id: 5 }] }, 'messages[1].tool_call_id'],
    [{ messages: [...ask, { role: 'assistant', tool_calls: [{ id: 'c', type: 'function', function: { name: 'f' } }] }] },
      'messages[1].tool_calls[0].function.arguments'],
  ]) {
    await assert.rejects(client.chat.completions.create({ ...base, ...extra }),
      (err) => err instanceof OpenAI.BadRequestError && err.param === param, `expected a 400 naming ${param}`);
  }
});
