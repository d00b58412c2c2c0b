// The official OpenAI SDK (npm "openai") as a real client of `tandem-infer serve`.
// The server runs the cpu backend over qwen3moe-tiny with the Qwen3 tokenizer copied next to it
// (the tiny model has none); see makeModelDir for the one change the tiny vocabulary needs.
// Env: TANDEM_INFER_BIN (the binary, set by CTest), TANDEM_TESTDATA (reference data).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';

const BIN = process.env.TANDEM_INFER_BIN;
const TESTDATA = process.env.TANDEM_TESTDATA || '/work/shared/testdata';
const API_KEY = 'sdk-test-key';
const MODEL = 'tiny-chat';

let server;       // the child process
let baseURL;      // http://127.0.0.1:PORT/v1
let stderrText = '';
let modelDir;

// The tiny model's vocabulary has 4096 ids while Qwen3's added tokens (<|im_start|>, <|im_end|>,
// <think>, ...) sit at 151643..151668, beyond its embedding. So the fixture's tokenizer.json
// moves the 26 added tokens to 4070..4095 and drops the BPE entries that had those ids (and the
// merges using them); everything else is Qwen3's tokenizer unchanged.
function makeModelDir() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tandem-sdk-'));
  const tiny = path.join(TESTDATA, 'qwen3moe-tiny');
  for (const f of ['config.json', 'model.safetensors']) fs.symlinkSync(path.join(tiny, f), path.join(dir, f));
  const src = path.join(TESTDATA, 'qwen3-tokenizer');
  fs.copyFileSync(path.join(src, 'tokenizer_config.json'), path.join(dir, 'tokenizer_config.json'));
  const t = JSON.parse(fs.readFileSync(path.join(src, 'tokenizer.json'), 'utf8'));
  const first = 4096 - t.added_tokens.length;
  const removed = new Set();
  for (const [tok, id] of Object.entries(t.model.vocab)) {
    if (id >= first) {
      removed.add(tok);
      delete t.model.vocab[tok];
    }
  }
  t.model.merges = t.model.merges.filter((m) => {
    const [l, r] = Array.isArray(m) ? m : [m.slice(0, m.indexOf(' ')), m.slice(m.indexOf(' ') + 1)];
    return !removed.has(l) && !removed.has(r) && !removed.has(l + r);
  });
  t.added_tokens.forEach((a, i) => { a.id = first + i; });
  fs.writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(t));
  return dir;
}

// Starts the server on port 0 and resolves with the URL from its ready line.
function startServer() {
  return new Promise((resolve, reject) => {
    const args = ['serve', '--model', modelDir, '--host', '127.0.0.1', '--port', '0',
                  '--served-model-name', MODEL, '--api-key', API_KEY,
                  '--max-model-len', '1024', '--kv-tokens', '16384', '--max-num-seqs', '8'];
    server = spawn(BIN, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const timer = setTimeout(() => reject(new Error(`no ready line within 60 s; stderr:\n${stderrText}`)), 60000);
    let out = '';
    server.stdout.on('data', (d) => {
      out += d.toString();
      const m = out.match(/tandem-infer serving model=(\S+) on (http:\/\/\S+)/);
      if (m) {
        clearTimeout(timer);
        resolve(m[2]);
      }
    });
    server.stderr.on('data', (d) => { stderrText += d.toString(); });
    server.on('exit', (code, sig) => {
      clearTimeout(timer);
      reject(new Error(`server exited early (code ${code}, signal ${sig}); stderr:\n${stderrText}`));
    });
  });
}

before(async () => {
  assert.ok(BIN, 'TANDEM_INFER_BIN must name the tandem-infer binary');
  modelDir = makeModelDir();
  const url = await startServer();
  baseURL = `${url}/v1`;
  console.log(`server ready at ${url}`);
});

after(async () => {
  if (server && server.exitCode === null) {
    // SIGTERM is a graceful stop: the process must exit 0 on its own.
    const exited = new Promise((resolve) => server.once('exit', (code, sig) => resolve({ code, sig })));
    server.kill('SIGTERM');
    const result = await Promise.race([exited, new Promise((r) => setTimeout(() => r(null), 20000))]);
    if (result === null) server.kill('SIGKILL');
    assert.deepEqual(result, { code: 0, sig: null }, `graceful stop; stderr:\n${stderrText.slice(-2000)}`);
  }
  if (modelDir) fs.rmSync(modelDir, { recursive: true, force: true });
});

const client = () => new OpenAI({ baseURL, apiKey: API_KEY, maxRetries: 0, timeout: 60000 });

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
    client().completions.create({ model: MODEL, prompt: 'x', n: 2 }),
    (err) => err instanceof OpenAI.BadRequestError && err.param === 'n');
  const wrongKey = new OpenAI({ baseURL, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(wrongKey.models.list(), (err) => err instanceof OpenAI.AuthenticationError);
});
