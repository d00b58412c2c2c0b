// The cluster head's OpenAI API through the official SDK (npm "openai"): `tandemctl up` brings up
// two real tandem-agentd processes on loopback (TP=2, cpu backend, the cluster token and mutual
// TLS from `tandemctl certs`, as scripts/demo.sh and tests/integration/loopback_cluster.h do) over
// qwen3moe-tiny carrying the Qwen3 tokenizer and chat template (serve_fixture.mjs makeModelDir),
// and the head serves the same API as `tandem-infer serve` (ServingStack). Checked here: the head
// renders the model's own template (tools, tool calls, tool results) exactly as
// @huggingface/jinja does from the context vLLM builds, chat with tools (tool_choice auto), and
// streaming equal to the whole answer.
// Env: TANDEM_AGENTD_BIN, TANDEMCTL_BIN (set by CTest), TANDEM_TESTDATA (reference data).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { makeModelDir, writeKeyFile } from './serve_fixture.mjs';

const AGENTD = process.env.TANDEM_AGENTD_BIN;
const TANDEMCTL = process.env.TANDEMCTL_BIN;
const API_KEY = 'cluster-sdk-key-0123456789';
const MODEL = 'tiny-cluster';
// @huggingface/jinja, the reference renderer, comes with the chat templates (scripts/testdata.sh).
const { Template } = createRequire(fileURLToPath(new URL('../data/package.json', import.meta.url)))('@huggingface/jinja');

let work;           // the test's folder: model root, secrets, agent logs, controller state
let cluster;        // cluster.yaml
let baseURL;
const agents = [];  // { proc, name }

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

function writeSecret(file, text) {
  fs.writeFileSync(file, text, { mode: 0o600 });
  return file;
}

// tandemctl with its output; fails the test with that output on a non-zero exit.
function ctl(args, timeoutMs = 120000) {
  const r = spawnSync(TANDEMCTL, args, { encoding: 'utf8', timeout: timeoutMs });
  const out = `${r.stdout ?? ''}${r.stderr ?? ''}`;
  assert.equal(r.status, 0, `tandemctl ${args.join(' ')} exited ${r.status} (${r.signal ?? 'no signal'}):\n${out}`);
  return out;
}

// One agent on its port, confined to the work folder; resolves once it prints its ready line.
function startAgent(name, port) {
  const tls = path.join(work, 'tls');
  const proc = spawn(AGENTD, ['--listen', `127.0.0.1:${port}`, '--node-name', name, '--state-dir', path.join(work, `state-${name}`),
    '--token-file', path.join(work, 'token'), '--model-root', work, '--tls-cert', path.join(tls, `${name}.pem`),
    '--tls-key', path.join(tls, `${name}.key`), '--tls-ca', path.join(tls, 'ca.pem')], { stdio: ['ignore', 'pipe', 'pipe'] });
  agents.push({ proc, name });
  let out = '';
  let err = '';
  proc.stderr.on('data', (d) => { err += d.toString(); });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name}: no ready line within 20 s:\n${err}`)), 20000);
    proc.stdout.on('data', (d) => {
      out += d.toString();
      if (out.includes('tandem-agentd ready')) {
        clearTimeout(timer);
        resolve();
      }
    });
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited (${code}) before it was ready:\n${err}`));
    });
  });
}

before(async () => {
  assert.ok(AGENTD && TANDEMCTL, 'TANDEM_AGENTD_BIN and TANDEMCTL_BIN must name the binaries');
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'tandem-sdk-cluster-'));
  const model = makeModelDir();
  // The agents open models only under their --model-root, so each node gets a real copy there.
  for (const m of ['model1', 'model2']) fs.cpSync(model, path.join(work, m), { recursive: true, dereference: true });
  fs.rmSync(model, { recursive: true, force: true });
  writeSecret(path.join(work, 'token'), 'cluster-sdk-test-token\n');
  const [port1, port2, apiPort] = [await freePort(), await freePort(), await freePort()];
  fs.writeFileSync(path.join(work, 'certs.yaml'),
    `model: {path: /m}\nnodes:\n  - {name: n1, agent: '127.0.0.1:${port1}'}\n  - {name: n2, agent: '127.0.0.1:${port2}'}\n`);
  ctl(['certs', '-f', path.join(work, 'certs.yaml'), '--out', path.join(work, 'tls')]);
  await Promise.all([startAgent('n1', port1), startAgent('n2', port2)]);
  cluster = path.join(work, 'cluster.yaml');
  const tls = path.join(work, 'tls');
  fs.writeFileSync(cluster, `cluster: sdk
model:
  served_name: ${MODEL}
engine:
  backend: cpu
  memory_fraction: 0.01
  kv_tokens: 4096
  max_num_seqs: 4
api:
  listen: 127.0.0.1:${apiPort}
  key_file: ${writeKeyFile(work, API_KEY)}
auth:
  token_file: ${path.join(work, 'token')}
tls:
  ca: ${path.join(tls, 'ca.pem')}
  cert: ${path.join(tls, 'controller.pem')}
  key: ${path.join(tls, 'controller.key')}
probe:
  prompt_ids: [1, 2, 3, 4]
  max_tokens: 4
timeouts:
  load: 60s
  join: 30s
nodes:
  - name: n1
    agent: 127.0.0.1:${port1}
    model_path: ${path.join(work, 'model1')}
  - name: n2
    agent: 127.0.0.1:${port2}
    model_path: ${path.join(work, 'model2')}
`);
  const up = ctl(['up', '-f', cluster, '--state-dir', path.join(work, 'ctl')]);
  assert.match(up, /serving generation/, up);
  baseURL = `http://127.0.0.1:${apiPort}/v1`;
  console.log(`cluster head serving at ${baseURL}`);
});

after(async () => {
  if (cluster && fs.existsSync(cluster)) {
    const r = spawnSync(TANDEMCTL, ['down', '-f', cluster], { encoding: 'utf8', timeout: 30000 });
    if (r.status !== 0) console.log(`tandemctl down exited ${r.status}:\n${r.stdout}${r.stderr}`);
  }
  await Promise.all(agents.map(({ proc }) => new Promise((resolve) => {
    if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
    const timer = setTimeout(() => proc.kill('SIGKILL'), 10000);
    proc.once('exit', () => { clearTimeout(timer); resolve(); });
    proc.kill('SIGTERM');
  })));
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

const client = () => new OpenAI({ baseURL, apiKey: API_KEY, maxRetries: 0, timeout: 60000 });

const weather = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather for a city — «quoted»',
    // Keys deliberately out of alphabetical order: the prompt must keep the request's order.
    parameters: { type: 'object', properties: { unit: { type: 'string', enum: ['celsius', 'fahrenheit'] }, location: { type: 'string' } }, required: ['location'] },
  },
};
const toolRound = [
  { role: 'system', content: 'You can use tools.' },
  { role: 'user', content: 'Weather in Zürich?' },
  { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"unit":"celsius","location":"Zürich"}' } }] },
  { role: 'tool', tool_call_id: 'call_1', content: '{"temperature": 21}' },
  { role: 'user', content: 'And tomorrow?' },
];

test('the head serves the models list with the served name', async () => {
  const models = await client().models.list();
  assert.deepEqual(models.data.map((m) => m.id), [MODEL]);
});

test("the head renders the model's own chat template, tools and tool results included", async () => {
  // What the template must make of this conversation: the model folder's Qwen3 template rendered
  // by @huggingface/jinja from the context vLLM builds (null content "", arguments parsed).
  const source = JSON.parse(fs.readFileSync(path.join(work, 'model1', 'tokenizer_config.json'), 'utf8')).chat_template;
  const messages = toolRound.map((m) => {
    const out = { role: m.role, content: m.content ?? '' };
    if (m.tool_calls) out.tool_calls = m.tool_calls.map((c) => ({ id: c.id, type: c.type, function: { name: c.function.name, arguments: JSON.parse(c.function.arguments) } }));
    if (m.tool_call_id) out.tool_call_id = m.tool_call_id;
    return out;
  });
  const render = (msgs, tools) => new Template(source).render({ messages: msgs, tools, add_generation_prompt: true, enable_thinking: false, bos_token: '', eos_token: '<|im_end|>' });
  const prompt = render(messages, [weather]);
  assert.match(prompt, /"properties": \{"unit": .*"location": /, 'the reference keeps the key order');
  assert.match(prompt, /<tool_call>\n\{"name": "get_weather", "arguments": \{"unit": "celsius", "location": "Zürich"\}\}\n<\/tool_call>/);

  // The chat request and that text as a plain prompt give as many prompt tokens and the same
  // greedy text. The random weights answer much the same whatever the prompt, so the count is
  // what tells prompts apart: the same conversation with every key sorted (what a sorting JSON
  // library would pass on) must count differently, or this check would prove nothing.
  const common = { model: MODEL, max_tokens: 6, temperature: 0, ignore_eos: true };
  const chat = await client().chat.completions.create({ ...common, messages: toolRound, tools: [weather], chat_template_kwargs: { enable_thinking: false } });
  const completion = await client().completions.create({ ...common, prompt });
  assert.equal(chat.usage.prompt_tokens, completion.usage.prompt_tokens);
  assert.equal(chat.choices[0].message.content, completion.choices[0].text);
  const sortKeys = (v) => (Array.isArray(v) ? v.map(sortKeys)
    : v && typeof v === 'object' ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortKeys(v[k])])) : v);
  const sorted = await client().completions.create({ ...common, max_tokens: 1, prompt: render(sortKeys(messages), sortKeys([weather])) });
  assert.notEqual(sorted.usage.prompt_tokens, chat.usage.prompt_tokens, 'key order must change the prompt for this check to mean anything');
  console.log(`prompt ${chat.usage.prompt_tokens} tokens; answer ${JSON.stringify(chat.choices[0].message.content)}`);
});

test('chat with tools (tool_choice auto) answers in the OpenAI shape', async () => {
  const res = await client().chat.completions.create({
    model: MODEL, messages: toolRound, tools: [weather], tool_choice: 'auto', max_tokens: 12, temperature: 0,
  });
  assert.equal(res.object, 'chat.completion');
  const choice = res.choices[0];
  assert.equal(choice.message.role, 'assistant');
  assert.ok(['stop', 'length', 'tool_calls'].includes(choice.finish_reason), choice.finish_reason);
  // Random weights rarely write a call; when they do it must be a well-formed one.
  for (const call of choice.message.tool_calls ?? []) {
    assert.equal(call.type, 'function');
    assert.match(call.id, /\S/);
    assert.equal(typeof call.function.name, 'string');
    assert.equal(typeof call.function.arguments, 'string');
  }
  if (choice.finish_reason === 'tool_calls') assert.ok(choice.message.tool_calls.length > 0);
  else assert.equal(typeof choice.message.content, 'string');
  assert.ok(res.usage.completion_tokens >= 1 && res.usage.completion_tokens <= 12);
});

test('streaming from the head gives the whole answer, chunk by chunk', async () => {
  const params = { model: MODEL, messages: toolRound, tools: [weather], max_tokens: 10, temperature: 0, ignore_eos: true, chat_template_kwargs: { enable_thinking: false } };
  const whole = await client().chat.completions.create(params);
  const stream = await client().chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
  let text = '';
  let calls = 0;
  let finish = null;
  let usage = null;
  let chunks = 0;
  for await (const chunk of stream) {
    ++chunks;
    if (chunk.usage) usage = chunk.usage;
    const c = chunk.choices[0];
    if (!c) continue;
    if (c.delta.content) text += c.delta.content;
    calls += c.delta.tool_calls?.length ?? 0;
    if (c.finish_reason) finish = c.finish_reason;
  }
  assert.ok(chunks > 2, `${chunks} chunks`);
  assert.equal(text, whole.choices[0].message.content ?? '');
  assert.equal(calls > 0, (whole.choices[0].message.tool_calls ?? []).length > 0);
  assert.equal(finish, whole.choices[0].finish_reason);
  assert.deepEqual(usage, whole.usage);
});
