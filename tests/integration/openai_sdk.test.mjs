// The official OpenAI SDK (npm "openai") as a real client of `tandem-infer serve`.
// The server runs the cpu backend over qwen3moe-tiny with the Qwen3 tokenizer copied next to it
// (the tiny model has none); see serve_fixture.mjs makeModelDir for the one change the tiny vocabulary needs.
// Env: TANDEM_INFER_BIN (the binary, set by CTest), TANDEM_TESTDATA (reference data).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startTinyServer, stopTinyServer } from './serve_fixture.mjs';

const API_KEY = 'sdk-test-key-0123456789';  // --api-key-file wants at least 16 bytes
const MODEL = 'tiny-chat';

let tiny;         // startTinyServer's { server, dir, client }
let baseURL;      // http://127.0.0.1:PORT/v1

before(async () => {
  tiny = await startTinyServer(MODEL, { apiKey: API_KEY });
  baseURL = `${tiny.server.url}/v1`;
  console.log(`server ready at ${tiny.server.url}`);
});

after(() => stopTinyServer(tiny));

const client = () => tiny.client;

test('models.list names the served model', async () => {
  const models = await client().models.list();
  const ids = models.data.map((m) => m.id);
  assert.deepEqual(ids, [MODEL]);
});

test('chat completion and the same chat streamed give the same text', async () => {
  const params = {
    model: MODEL,
    messages: [{ role: 'user', content: 'Say hello.' }],
    max_tokens: 12,
    temperature: 0,
    chat_template_kwargs: { enable_thinking: false },
  };
  const res = await client().chat.completions.create(params);
  assert.equal(res.object, 'chat.completion');
  assert.equal(res.choices[0].message.role, 'assistant');
  assert.equal(typeof res.choices[0].message.content, 'string');
  assert.ok(['stop', 'length'].includes(res.choices[0].finish_reason));
  assert.ok(res.usage.prompt_tokens > 5, `prompt tokens ${res.usage.prompt_tokens}`);
  assert.ok(res.usage.completion_tokens >= 1 && res.usage.completion_tokens <= 12);

  const stream = await client().chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
  let text = '';
  let role = null;
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    if (chunk.choices.length === 0) continue;
    const c = chunk.choices[0];
    if (c.delta.role) role = c.delta.role;
    if (c.delta.content) text += c.delta.content;
    if (c.finish_reason) finish = c.finish_reason;
  }
  assert.equal(role, 'assistant');
  assert.equal(text, res.choices[0].message.content);
  assert.equal(finish, res.choices[0].finish_reason);
  assert.deepEqual(usage, res.usage);
  console.log(`chat: ${JSON.stringify(text)} (${res.usage.completion_tokens} tokens, ${finish})`);
});

test('completions with a text prompt and with token ids', async () => {
  const res = await client().completions.create({ model: MODEL, prompt: 'Once upon a time', max_tokens: 8, temperature: 0, ignore_eos: true });
  assert.equal(res.object, 'text_completion');
  assert.equal(typeof res.choices[0].text, 'string');
  assert.equal(res.choices[0].finish_reason, 'length');
  assert.equal(res.usage.completion_tokens, 8);

  const ids = await client().completions.create({ model: MODEL, prompt: [1, 2, 3, 4], max_tokens: 5, temperature: 0, ignore_eos: true });
  assert.equal(ids.usage.prompt_tokens, 4);
  assert.equal(ids.usage.completion_tokens, 5);

  const stream = await client().completions.create({ model: MODEL, prompt: 'Once upon a time', max_tokens: 8, temperature: 0, ignore_eos: true, stream: true });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
  assert.equal(text, res.choices[0].text);
});

test('errors map to the SDK error classes', async () => {
  await assert.rejects(
    client().chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'hi' }] }),
    (err) => {
      assert.ok(err instanceof OpenAI.NotFoundError, `got ${err.constructor.name}`);
      assert.equal(err.status, 404);
      assert.equal(err.code, 'model_not_found');
      return true;
    });
  await assert.rejects(
    client().completions.create({ model: MODEL, prompt: 'x', n: 65 }),
    (err) => err instanceof OpenAI.BadRequestError && err.param === 'n');
  const wrongKey = new OpenAI({ baseURL, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(wrongKey.models.list(), (err) => err instanceof OpenAI.AuthenticationError);
});

test('no parameter is silently ignored: unimplemented ones are refused naming them', async () => {
  const chat = { model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 };
  for (const [extra, param] of [
    [{ response_format: { type: 'json_schema', json_schema: { name: 'a', schema: { type: 'string', pattern: 'a+' } } } },
      'response_format.json_schema.schema'],
    [{ tool_choice: 'required' }, 'tool_choice'],
    [{ top_logprobs: 3 }, 'top_logprobs'],
    [{ store: true }, 'store'],
    [{ reasoning_effort: 'low' }, 'reasoning_effort'],
    [{ frobnicate: 1 }, 'frobnicate'],
  ]) {
    await assert.rejects(client().chat.completions.create({ ...chat, ...extra }),
      (err) => err instanceof OpenAI.BadRequestError && err.param === param,
      `expected a 400 naming ${param}`);
  }
  // What the SDK's users commonly send that changes nothing passes.
  const res = await client().chat.completions.create({
    ...chat, user: 'u-1', metadata: { run: 'sdk-test' }, store: false, service_tier: 'auto', n: 1,
    parallel_tool_calls: true, response_format: { type: 'text' },
  });
  assert.equal(res.object, 'chat.completion');
});

test('logit_bias, penalties and min_tokens reach the sampler', async () => {
  // +100 on one token outweighs any random-weight logit: greedy takes it every step, with or
  // without penalties (at most 2 * 6 subtracted).
  const res = await client().completions.create({
    model: MODEL, prompt: 'Once upon a time', max_tokens: 6, temperature: 0, logit_bias: { 42: 100 },
    presence_penalty: 2, frequency_penalty: 2, repetition_penalty: 1.5, min_p: 0.1, min_tokens: 6,
    return_token_ids: true,
  });
  assert.deepEqual(res.choices[0].token_ids, [42, 42, 42, 42, 42, 42]);
  // -100 on the token greedy picked first moves greedy off it.
  const plain = await client().completions.create({
    model: MODEL, prompt: 'Once upon a time', max_tokens: 1, temperature: 0, ignore_eos: true, return_token_ids: true,
  });
  const first = plain.choices[0].token_ids[0];
  const banned = await client().completions.create({
    model: MODEL, prompt: 'Once upon a time', max_tokens: 1, temperature: 0, ignore_eos: true, return_token_ids: true,
    logit_bias: { [first]: -100 },
  });
  assert.notEqual(banned.choices[0].token_ids[0], first);
  await assert.rejects(
    client().completions.create({ model: MODEL, prompt: 'x', max_tokens: 2, min_tokens: 3 }),
    (err) => err instanceof OpenAI.BadRequestError && err.param === 'min_tokens');
});

test('documents (vLLM extension) are accepted (Qwen3 renders none: same prompt) and malformed ones refused', async () => {
  const messages = [{ role: 'user', content: 'What does the document say?' }];
  const base = { model: MODEL, messages, max_tokens: 2, temperature: 0 };
  const without = await client().chat.completions.create(base);
  const withDocs = await client().chat.completions.create({ ...base, documents: [{ title: 'T', text: 'a long text '.repeat(20) }] });
  assert.equal(withDocs.usage.prompt_tokens, without.usage.prompt_tokens);
  await assert.rejects(client().chat.completions.create({ ...base, documents: { text: 'x' } }),
                       (e) => e instanceof OpenAI.BadRequestError && e.param === 'documents');
});

test('chat_template_kwargs reach the template: any key passes, the request\'s own are refused', async () => {
  const base = { model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, temperature: 0 };
  const plain = await client().chat.completions.create(base);
  const unread = await client().chat.completions.create({ ...base, chat_template_kwargs: { thinking_budget: 64 } });
  assert.equal(unread.usage.prompt_tokens, plain.usage.prompt_tokens);  // Qwen3's template does not read it
  const noThink = await client().chat.completions.create({ ...base, chat_template_kwargs: { enable_thinking: false } });
  assert.ok(noThink.usage.prompt_tokens > plain.usage.prompt_tokens);  // the empty think block
  await assert.rejects(client().chat.completions.create({ ...base, chat_template_kwargs: { messages: [] } }),
                       (e) => e instanceof OpenAI.BadRequestError && e.param === 'chat_template_kwargs.messages');
});
