// Outputs of issue 16 through the official OpenAI SDK against a real `tandem-infer serve` (cpu
// backend, random-weight qwen3moe-tiny with the real Qwen3 tokenizer): chat logprobs with
// top_logprobs (whole and streamed), n > 1 choices (whole and streamed, interleaved by index),
// the completions logprobs integer, echo (with the prompt's logprobs), a batch of prompts, and
// models.retrieve.
// Env: TANDEM_INFER_BIN (the binary, set by CTest), TANDEM_TESTDATA (reference data).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startTinyServer, stopTinyServer } from './serve_fixture.mjs';

const MODEL = 'tiny-outputs';
let tiny;
let client;

before(async () => {
  tiny = await startTinyServer(MODEL);
  client = tiny.client;
});

after(() => stopTinyServer(tiny));

const chat = { model: MODEL, messages: [{ role: 'user', content: 'Count to five.' }], max_tokens: 6, temperature: 0,
               ignore_eos: true, chat_template_kwargs: { enable_thinking: false } };

test('models.retrieve: the served model, and NotFoundError for another', async () => {
  const m = await client.models.retrieve(MODEL);
  assert.equal(m.id, MODEL);
  assert.equal(m.object, 'model');
  await assert.rejects(client.models.retrieve('gpt-4o'),
    (err) => err instanceof OpenAI.NotFoundError && err.code === 'model_not_found');
});

test('chat logprobs: one entry per token with its top alternatives, the same when streamed', async () => {
  const res = await client.chat.completions.create({ ...chat, logprobs: true, top_logprobs: 3 });
  const entries = res.choices[0].logprobs.content;
  assert.equal(entries.length, res.usage.completion_tokens);
  for (const e of entries) {
    assert.ok(e.logprob <= 0);
    assert.equal(e.top_logprobs.length, 3);
    for (let i = 1; i < 3; ++i) assert.ok(e.top_logprobs[i - 1].logprob >= e.top_logprobs[i].logprob);
    // Greedy takes the most likely token: it is the first alternative.
    assert.equal(e.top_logprobs[0].token, e.token);
    assert.ok(Math.abs(e.top_logprobs[0].logprob - e.logprob) < 1e-6);
  }
  console.log(`chat logprobs: ${JSON.stringify(entries.slice(0, 2))}`);

  const stream = await client.chat.completions.create({ ...chat, logprobs: true, top_logprobs: 3, stream: true });
  const streamed = [];
  for await (const chunk of stream) {
    for (const c of chunk.choices) if (c.logprobs) streamed.push(...c.logprobs.content);
  }
  assert.deepEqual(streamed.map((e) => [e.token, e.logprob]), entries.map((e) => [e.token, e.logprob]));
});

test('n choices: indexed, greedy ones equal, seeded sampled ones reproducible; streamed interleaved by index', async () => {
  const greedy = await client.chat.completions.create({ ...chat, n: 3 });
  assert.deepEqual(greedy.choices.map((c) => c.index), [0, 1, 2]);
  const one = await client.chat.completions.create(chat);
  for (const c of greedy.choices) assert.equal(c.message.content, one.choices[0].message.content);
  assert.equal(greedy.usage.completion_tokens, 3 * one.usage.completion_tokens);
  assert.equal(greedy.usage.prompt_tokens, one.usage.prompt_tokens);  // the prompt counts once

  const sampled = { ...chat, n: 3, temperature: 1.0, seed: 7 };
  const a = await client.chat.completions.create(sampled);
  const b = await client.chat.completions.create(sampled);
  assert.deepEqual(a.choices.map((c) => c.message.content), b.choices.map((c) => c.message.content));
  console.log(`n=3 sampled: ${JSON.stringify(a.choices.map((c) => c.message.content))}`);

  const stream = await client.chat.completions.create({ ...sampled, stream: true, stream_options: { include_usage: true } });
  const text = ['', '', ''];
  const finish = [];
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text[c.index] += c.delta.content ?? '';
      if (c.finish_reason) finish[c.index] = c.finish_reason;
    }
  }
  assert.deepEqual(text, a.choices.map((c) => c.message.content));
  assert.deepEqual(finish, ['length', 'length', 'length']);
  assert.deepEqual(usage, a.usage);
});

test('completions: logprobs integer, echo with the prompt logprobs, a batch of prompts', async () => {
  const params = { model: MODEL, prompt: 'Once upon a time', max_tokens: 5, temperature: 0, ignore_eos: true };
  const res = await client.completions.create({ ...params, logprobs: 2 });
  const lp = res.choices[0].logprobs;
  assert.equal(lp.tokens.length, 5);
  assert.equal(lp.token_logprobs.length, 5);
  assert.equal(lp.text_offset.length, 5);
  for (let i = 0; i < 5; ++i) {
    assert.ok(lp.token_logprobs[i] <= 0);
    assert.ok(Object.keys(lp.top_logprobs[i]).length >= 2);  // the two best (the chosen one among them, greedy)
    assert.equal(lp.top_logprobs[i][lp.tokens[i]], lp.token_logprobs[i]);
    if (i > 0) assert.ok(lp.text_offset[i] >= lp.text_offset[i - 1]);
  }

  const echoed = await client.completions.create({ ...params, echo: true, logprobs: 1 });
  const c = echoed.choices[0];
  assert.ok(c.text.startsWith(params.prompt), c.text);
  assert.equal(c.text, params.prompt + res.choices[0].text);
  assert.equal(c.logprobs.tokens.length, echoed.usage.prompt_tokens + 5);
  assert.equal(c.logprobs.token_logprobs[0], null);  // nothing comes before the first token
  assert.ok(c.logprobs.token_logprobs.slice(1).every((v) => v <= 0));
  assert.deepEqual(c.logprobs.token_logprobs.slice(-5), lp.token_logprobs);
  console.log(`echo: ${JSON.stringify(c.text)}`);

  const prompts = ['Once upon a time', 'The capital of France'];
  const batch = await client.completions.create({ ...params, prompt: prompts, n: 2 });
  assert.deepEqual(batch.choices.map((x) => x.index), [0, 1, 2, 3]);
  const second = await client.completions.create({ ...params, prompt: prompts[1] });
  // Prompt-major: choices 0, 1 are the first prompt's, 2, 3 the second's.
  assert.equal(batch.choices[0].text, res.choices[0].text);
  assert.equal(batch.choices[3].text, second.choices[0].text);
  assert.equal(batch.usage.prompt_tokens, res.usage.prompt_tokens + second.usage.prompt_tokens);
  assert.equal(batch.usage.completion_tokens, 20);

  const stream = await client.completions.create({ ...params, prompt: prompts, stream: true, echo: true });
  const texts = ['', ''];
  for await (const chunk of stream) for (const x of chunk.choices) texts[x.index] += x.text;
  assert.deepEqual(texts, [prompts[0] + res.choices[0].text, prompts[1] + second.choices[0].text]);
});
