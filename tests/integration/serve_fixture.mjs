// A real `tandem-infer serve` for the node integration tests: a model folder (qwen3moe-tiny with
// the Qwen3 tokenizer fitted to its vocabulary), an API key file, the process on port 0 with its
// URL read from the ready line, and a graceful stop that must exit 0.
// Env: TANDEM_INFER_BIN (the binary, set by CTest), TANDEM_TESTDATA (reference data).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';

export const BIN = process.env.TANDEM_INFER_BIN;
// The checkout's tests/data unless TANDEM_TESTDATA points elsewhere (as the C++ tests do).
export const TESTDATA = process.env.TANDEM_TESTDATA || fileURLToPath(new URL('../data', import.meta.url));

// The tiny model's vocabulary has 4096 ids while Qwen3's added tokens (<|im_start|>, <|im_end|>,
// <think>, ...) sit at 151643..151668, beyond its embedding. So the fixture's tokenizer.json
// moves the 26 added tokens to 4070..4095 and drops the BPE entries that had those ids (and the
// merges using them); everything else is Qwen3's tokenizer unchanged.
export function makeModelDir() {
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

// Writes `key` to a file only its owner can read (what --api-key-file requires).
export function writeKeyFile(dir, key) {
  const file = path.join(dir, 'api.key');
  fs.writeFileSync(file, `${key}\n`, { mode: 0o600 });
  return file;
}

// Starts `tandem-infer serve --model modelDir --port 0 ...extraArgs`; resolves with
// { proc, url, stderr() } once the ready line names the URL.
export function startServer(modelDir, extraArgs) {
  assert.ok(BIN, 'TANDEM_INFER_BIN must name the tandem-infer binary');
  return new Promise((resolve, reject) => {
    const args = ['serve', '--model', modelDir, '--host', '127.0.0.1', '--port', '0', ...extraArgs];
    const proc = spawn(BIN, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderrText = '';
    const timer = setTimeout(() => reject(new Error(`no ready line within 60 s; stderr:\n${stderrText}`)), 60000);
    let out = '';
    proc.stdout.on('data', (d) => {
      out += d.toString();
      const m = out.match(/tandem-infer serving model=(\S+) on (http:\/\/\S+)/);
      if (m) {
        clearTimeout(timer);
        resolve({ proc, url: m[2], stderr: () => stderrText });
      }
    });
    proc.stderr.on('data', (d) => { stderrText += d.toString(); });
    proc.on('exit', (code, sig) => {
      clearTimeout(timer);
      reject(new Error(`server exited early (code ${code}, signal ${sig}); stderr:\n${stderrText}`));
    });
  });
}

// SIGTERM is a graceful stop: the process must exit 0 on its own.
export async function stopServer(server) {
  if (!server || server.proc.exitCode !== null) return;
  const exited = new Promise((resolve) => server.proc.once('exit', (code, sig) => resolve({ code, sig })));
  server.proc.kill('SIGTERM');
  let timer;
  const result = await Promise.race([exited, new Promise((r) => { timer = setTimeout(() => r(null), 20000); })]);
  clearTimeout(timer);  // a pending timer would keep the test process alive for 20 s
  if (result === null) server.proc.kill('SIGKILL');
  assert.deepEqual(result, { code: 0, sig: null }, `graceful stop; stderr:\n${server.stderr().slice(-2000)}`);
}

// The server of an SDK test file: the tiny model in a fresh folder (`prepare(dir)` may add files
// to it first), served as `model` with the usual test limits, with an API key file when `apiKey`
// is given; resolves with { server, dir, client } (client: the official SDK pointed at it).
// stopTinyServer stops it and removes the folder.
export async function startTinyServer(model, { apiKey, prepare } = {}) {
  const dir = makeModelDir();
  try {
    if (prepare) prepare(dir);
    const args = ['--served-model-name', model, '--max-model-len', '1024', '--kv-tokens', '16384', '--max-num-seqs', '8'];
    if (apiKey) args.push('--api-key-file', writeKeyFile(dir, apiKey));
    const server = await startServer(dir, args);
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: apiKey || 'unused', maxRetries: 0, timeout: 60000 });
    return { server, dir, client };
  } catch (e) {
    fs.rmSync(dir, { recursive: true, force: true });
    throw e;
  }
}

export async function stopTinyServer(tiny) {
  if (!tiny) return;
  await stopServer(tiny.server);
  fs.rmSync(tiny.dir, { recursive: true, force: true });
}
