#!/usr/bin/env node
// Load test for `promptcache serve` (not a unit test: it takes a minute).
// N concurrent streaming clients for D seconds, a third of them hanging up
// early. Passes when: no server errors, the server is alive, the KV pool is
// back to its idle usage afterwards, and every completed greedy output equals
// the single-request output for its prompt.
//
//   node scripts/load_test.mjs [--bin build/promptcache] [--model M.gguf]
//        [--clients 32] [--seconds 60] [--url http://host:port]
import assert from 'node:assert/strict';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { startServer } from '../tests/node/serve.mjs';

const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => {
  if (a.startsWith('--')) acc.push([a.slice(2), all[i + 1]]);
  return acc;
}, []));
const bin = args.bin ?? 'build/promptcache';
const model = args.model ?? path.join(os.homedir(), '.cache/promptcache/bench-135m-q8_0.gguf');
const numClients = Number(args.clients ?? 32);
const seconds = Number(args.seconds ?? 60);
const maxTokens = 48;

let server = null;
let base = args.url;
if (!base) {
  server = await startServer(bin, model, ['--max-running', String(numClients)]);
  base = `http://127.0.0.1:${server.port}`;
}
const url = new URL(base);

function request(method, p, body, { onChunk, abortAfterChunks } = {}) {
  return new Promise((resolve) => {
    const req = http.request({ host: url.hostname, port: url.port, path: p, method,
      headers: { 'Content-Type': 'application/json' } }, (res) => {
      let data = '';
      let chunks = 0;
      res.on('data', (d) => {
        data += d;
        chunks += 1;
        if (onChunk) onChunk(d);
        if (abortAfterChunks && chunks >= abortAfterChunks) {
          req.destroy();
          resolve({ status: res.statusCode, body: data, aborted: true });
        }
      });
      res.on('end', () => resolve({ status: res.statusCode, body: data, aborted: false }));
      res.on('error', () => resolve({ status: res.statusCode, body: data, aborted: true }));
    });
    req.on('error', (e) => resolve({ status: 0, body: String(e), aborted: !!abortAfterChunks }));
    req.end(body ? JSON.stringify(body) : undefined);
  });
}

const topics = ['a dragon', 'the sea', 'a small robot', 'two friends', 'a rainy day', 'a lost key', 'the moon', 'a garden'];
const system = 'You are a storyteller. Write short, gentle stories for children, with simple words and a happy ending. ';
const prompts = topics.map((t, i) => (i % 2 ? system : '') + `Once upon a time there was ${t}. Every morning,`);

function tokensOf(sseBody) {
  return [...sseBody.matchAll(/"tokens":\[(\d+)\]/g)].map((m) => Number(m[1]));
}
function completion(prompt, n, stream = true) {
  return { prompt, max_tokens: n, temperature: 0, ignore_eos: true, stream, return_tokens: true };
}
async function metrics() {
  const r = await request('GET', '/metrics');
  const get = (name) => Number((r.body.match(new RegExp(`^${name} (\\S+)$`, 'm')) ?? [])[1] ?? NaN);
  return { used: get('promptcache_kv_pool_blocks\\{state="used"\\}'), running: get('promptcache_requests_running'),
    waiting: get('promptcache_requests_waiting') };
}

// Single-request references, one at a time on an idle server.
const refs = [];
for (const p of prompts) {
  const r = await request('POST', '/v1/completions', completion(p, maxTokens, false));
  assert.equal(r.status, 200, r.body);
  refs.push(JSON.parse(r.body).choices[0].tokens);
}
const idle = await metrics();
console.error(`references done; idle KV blocks in use: ${idle.used}`);

const stats = { completed: 0, cancelled: 0, mismatches: 0, serverErrors: 0, otherErrors: 0, tokens: 0 };
const deadline = Date.now() + seconds * 1000;
async function client(id) {
  let k = id;
  while (Date.now() < deadline) {
    const which = k++ % prompts.length;
    const n = 8 + ((k * 7) % (maxTokens - 7));
    const hangUp = id % 3 === 0;
    const r = await request('POST', '/v1/completions', completion(prompts[which], n),
      hangUp ? { abortAfterChunks: 1 + (k % 5) } : {});
    if (r.status >= 500 || r.body.includes('"error"')) stats.serverErrors += 1;
    else if (r.status !== 200) stats.otherErrors += 1;
    else if (r.aborted) stats.cancelled += 1;
    else {
      const got = tokensOf(r.body);
      stats.tokens += got.length;
      const want = refs[which].slice(0, n);
      if (JSON.stringify(got) !== JSON.stringify(want)) stats.mismatches += 1;
      stats.completed += 1;
    }
  }
}
const progress = setInterval(() => process.stderr.write(
  `\r${Math.max(0, Math.round((deadline - Date.now()) / 1000))} s left: ${stats.completed} completed, ${stats.cancelled} hung up`), 1000);
await Promise.all(Array.from({ length: numClients }, (_, i) => client(i)));
clearInterval(progress);
process.stderr.write('\n');

// The pool must drain back to idle once every sequence has ended.
let after = await metrics();
for (let i = 0; i < 100 && (after.running > 0 || after.waiting > 0 || after.used !== idle.used); i++) {
  await new Promise((r) => setTimeout(r, 100));
  after = await metrics();
}
const health = await request('GET', '/health');
let exitCode = null;
if (server) {
  server.proc.kill('SIGTERM');
  exitCode = await server.exited;
}
const report = { clients: numClients, seconds, ...stats, idle_used_blocks: idle.used, after_used_blocks: after.used,
  after_running: after.running, health: health.status, server_exit_code: exitCode };
console.log(JSON.stringify(report, null, 2));
assert.equal(stats.serverErrors, 0, 'server errors');
assert.equal(stats.mismatches, 0, 'outputs differ from single-request outputs');
assert.ok(stats.completed > 0 && stats.cancelled > 0);
assert.equal(health.status, 200);
assert.equal(after.used, idle.used, 'KV pool did not return to idle usage');
if (server) assert.equal(exitCode, 0);
console.log('load test passed');
