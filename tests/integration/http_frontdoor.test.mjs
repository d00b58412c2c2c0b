// Issue 12's HTTP rows against a real `tandem-infer serve` on loopback (qwen3moe-tiny, cpu):
//  (a) 4 concurrent POSTs of a 62 MB body: 413 at once (the body is never read), the server's
//      peak RSS does not move; a 3 MiB text prompt: 400 context_length_exceeded, fast (it is
//      tokenized only up to the context length).
//  (b) 290 connections trickling their headers: /health and a completion still answer at once,
//      and every trickling socket is closed at the header deadline (the trickle does not extend it).
//  (c) a non-streaming request (max_tokens 4000) whose client hangs up after 1 s: the sequence is
//      cancelled within a second (abort counted, nothing running) instead of running to 4000.
// Env: TANDEM_INFER_BIN, TANDEM_TESTDATA (see serve_fixture.mjs).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { makeModelDir, startServer, stopServer } from './serve_fixture.mjs';

const HEADER_TIMEOUT_MS = 1500;
let server;
let modelDir;
let port;

before(async () => {
  modelDir = makeModelDir();
  server = await startServer(modelDir, ['--max-model-len', '8192', '--kv-tokens', '16384', '--max-num-seqs', '8',
                                        '--header-timeout-ms', String(HEADER_TIMEOUT_MS)]);
  port = Number(new URL(server.url).port);
});

after(async () => {
  await stopServer(server);
  if (modelDir) fs.rmSync(modelDir, { recursive: true, force: true });
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// kB from /proc/PID/status ("VmRSS", "VmHWM").
function procStatusKb(field) {
  const m = fs.readFileSync(`/proc/${server.proc.pid}/status`, 'utf8').match(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm'));
  return Number(m[1]);
}

// The value of the first sample of `name` whose labels contain `labels` (0 when absent).
async function metric(name, labels = '') {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  for (const line of text.split('\n')) {
    if (line.startsWith(name) && (line[name.length] === '{' || line[name.length] === ' ') && line.includes(labels)) {
      return Number(line.slice(line.lastIndexOf(' ') + 1));
    }
  }
  return 0;
}

// Sends `head` then up to `bodyBytes` of body as fast as the socket takes it, stopping once a
// response arrives; resolves with the status, when it came, and how much body was sent by then.
function postRaw(head, bodyBytes) {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1');
    const t0 = performance.now();
    let text = '';
    let status = null;
    let ms = null;
    let sent = 0;
    const guard = setTimeout(() => sock.destroy(), 20000);
    sock.on('data', (d) => {
      text += d.toString('latin1');
      const m = status === null && text.match(/^HTTP\/1\.1 (\d{3})/);
      if (m) {
        status = Number(m[1]);
        ms = performance.now() - t0;
      }
    });
    sock.on('error', () => {});  // EPIPE / ECONNRESET once the server has answered and closed
    sock.on('close', () => {
      clearTimeout(guard);
      resolve({ status, ms, sent, text });
    });
    sock.on('connect', async () => {
      sock.write(head);
      const chunk = Buffer.alloc(1 << 20, 'x');
      while (sent < bodyBytes && status === null && !sock.destroyed) {
        if (!sock.write(chunk)) await new Promise((r) => { sock.once('drain', r); sock.once('close', r); });
        sent += chunk.length;
      }
      if (status !== null) sock.end();
    });
  });
}

test('(a) 62 MB bodies get 413 unread; a 3 MiB prompt is refused without tokenizing it all', async () => {
  const hwmBefore = procStatusKb('VmHWM');
  const size = 62 * 1024 * 1024;
  const head = `POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${size}\r\n\r\n`;
  const results = await Promise.all([0, 1, 2, 3].map(() => postRaw(head, size)));
  for (const r of results) {
    assert.equal(r.status, 413, r.text.slice(0, 300));
    assert.ok(r.ms < 2000, `413 after ${r.ms} ms`);
    assert.match(r.text, /"code":"request_too_large"/);
  }
  const hwmAfter = procStatusKb('VmHWM');
  console.log(`62 MB x4: 413 after ${results.map((r) => r.ms.toFixed(1)).join(', ')} ms (body sent by then: ` +
              `${results.map((r) => (r.sent >> 20) + ' MiB').join(', ')}); server VmHWM ${hwmBefore} -> ${hwmAfter} kB, ` +
              `VmRSS ${procStatusKb('VmRSS')} kB`);
  assert.ok(hwmAfter - hwmBefore < 64 * 1024, `peak RSS grew by ${hwmAfter - hwmBefore} kB`);

  // 3 MiB of prose: ~750k tokens against a context of 8192.
  let prose = '';
  while (prose.length < 3 * 1024 * 1024) prose += 'The experts of a mixture route each token to four of sixteen. ';
  for (const [path, body] of [
    ['/v1/completions', { prompt: prose, max_tokens: 4 }],
    ['/v1/chat/completions', { messages: [{ role: 'user', content: prose }], max_tokens: 4 }],
  ]) {
    const t0 = performance.now();
    const res = await fetch(`${server.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' },
                                                     body: JSON.stringify(body) });
    const ms = performance.now() - t0;
    const j = await res.json();
    console.log(`${path} with a 3 MiB prompt: ${res.status} ${j.error?.code} in ${ms.toFixed(1)} ms`);
    assert.equal(res.status, 400);
    assert.equal(j.error.code, 'context_length_exceeded');
    assert.ok(ms < 1500, `refused after ${ms} ms`);
  }
  assert.ok(procStatusKb('VmHWM') - hwmBefore < 128 * 1024, 'peak RSS after the 3 MiB prompts');
});

test('(b) 290 trickling connections are closed at the header deadline while /health and completions answer', async () => {
  const head = 'GET /health HTTP/1.1\r\nHost: x\r\nX-Pad: ' + 'p'.repeat(200) + '\r\n\r\n';
  const timeoutsBefore = await metric('tandem_http_timeouts_total');
  const opened = performance.now();
  const connectedAt = new Array(290).fill(null);
  const closedAt = new Array(290).fill(null);  // after its own connect
  const socks = [];
  for (let i = 0; i < 290; ++i) {
    const s = net.connect(port, '127.0.0.1');
    s.on('error', () => {});
    s.on('connect', () => { connectedAt[i] = performance.now(); });
    // The server's close shows as 'end' once its reply (a 408) has been read.
    s.on('end', () => { closedAt[i] ??= performance.now() - connectedAt[i]; });
    s.on('close', () => { closedAt[i] ??= performance.now() - connectedAt[i]; });
    s.resume();
    socks.push(s);
  }
  let sent = 0;
  const trickle = setInterval(() => {
    for (const s of socks) if (!s.destroyed) s.write(head[sent]);
    ++sent;
  }, 100);
  const health = [];
  const completions = [];
  while (performance.now() - opened < HEADER_TIMEOUT_MS - 200) {
    let t0 = performance.now();
    const h = await fetch(`${server.url}/health`);
    assert.equal(h.status, 200);
    health.push(performance.now() - t0);
    t0 = performance.now();
    const c = await fetch(`${server.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' },
                                                           body: JSON.stringify({ prompt: [1, 2, 3], max_tokens: 4 }) });
    assert.equal(c.status, 200);
    await c.json();
    completions.push(performance.now() - t0);
    await sleep(100);
  }
  while (closedAt.some((t) => t === null) && performance.now() - opened < HEADER_TIMEOUT_MS + 3000) await sleep(50);
  clearInterval(trickle);
  for (const s of socks) s.destroy();
  const closed = closedAt.filter((t) => t !== null);
  const first = Math.min(...closed);
  const last = Math.max(...closed);
  console.log(`290 trickling sockets (${sent} bytes each of a ${head.length}-byte head sent): closed ` +
              `${first.toFixed(0)} to ${last.toFixed(0)} ms after their connect (deadline ${HEADER_TIMEOUT_MS} ms); /health worst ` +
              `${Math.max(...health).toFixed(1)} ms over ${health.length}, completion worst ${Math.max(...completions).toFixed(1)} ms`);
  assert.equal(closed.length, 290);
  assert.equal((await metric('tandem_http_timeouts_total')) - timeoutsBefore, 290);
  assert.ok(sent < head.length, 'still trickling at the deadline');
  assert.ok(first >= HEADER_TIMEOUT_MS - 100, `closed early at ${first} ms`);
  assert.ok(last < HEADER_TIMEOUT_MS + 1000, `closed late at ${last} ms`);
  assert.ok(Math.max(...health) < 1000);
  assert.ok(Math.max(...completions) < 1000);
});

test('(c) a non-streaming client that hangs up after 1 s cancels its sequence', async () => {
  const abortsBefore = await metric('tandem_request_success_total', 'finished_reason="abort"');
  const goneBefore = await metric('tandem_http_clients_gone_total');
  const tokensBefore = await metric('tandem_generation_tokens_total');
  const body = JSON.stringify({ prompt: [1, 2, 3], max_tokens: 4000, ignore_eos: true });
  const req = http.request({ host: '127.0.0.1', port, path: '/v1/completions', method: 'POST',
                             headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } });
  req.on('error', () => {});
  req.end(body);
  // As curl -m 1 does: hang up after 1 s (or sooner on a machine fast enough to near the end).
  const sent = performance.now();
  while (performance.now() - sent < 1000 && (await metric('tandem_generation_tokens_total')) - tokensBefore < 1500) {
    await sleep(50);
  }
  assert.equal(await metric('tandem_num_requests_running'), 1, 'the request is generating');
  req.destroy();
  const hungUp = performance.now();
  let running = 1;
  let aborts = abortsBefore;
  while ((running > 0 || aborts === abortsBefore) && performance.now() - hungUp < 3000) {
    await sleep(20);
    running = await metric('tandem_num_requests_running');
    aborts = await metric('tandem_request_success_total', 'finished_reason="abort"');
  }
  const ms = performance.now() - hungUp;
  const generated = (await metric('tandem_generation_tokens_total')) - tokensBefore;
  console.log(`hang-up after 1 s: cancelled (abort ${abortsBefore} -> ${aborts}, running ${running}) ${ms.toFixed(0)} ms later; ` +
              `${generated} of 4000 tokens generated`);
  assert.equal(running, 0);
  assert.equal(aborts, abortsBefore + 1);
  assert.equal((await metric('tandem_http_clients_gone_total')) - goneBefore, 1);
  assert.ok(ms < 1000, `cancelled after ${ms} ms`);
  assert.ok(generated < 4000, `${generated} tokens: the sequence ran to its end`);
});
