#!/usr/bin/env node
// Soak test for `promptcache serve` with faults (run by scripts/soak.sh; not
// a unit test: it takes ten minutes). Starts its own Redis and server (host,
// disk and Redis tiers, two tenants), runs N clients for D seconds (streams
// and non-streams, a third hanging up early), and injects faults on a cycle:
// Redis killed and restarted, disk segments corrupted, the disk filled and
// freed. Checks: every completed greedy output equals the same request's
// output with the cache off; no 5xx; the KV pool back to idle afterwards;
// resident memory bounded (the last third of the run no higher than the
// middle third plus a margin). Writes a JSON report; exit status 0 only if
// every check holds.
//
//   node scripts/soak.mjs --bin build/promptcache --model M.gguf --out DIR
//        [--clients 32] [--seconds 600] [--cycle 120]
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';

const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => {
  if (a.startsWith('--')) acc.push([a.slice(2), all[i + 1]]);
  return acc;
}, []));
const bin = args.bin ?? 'build/promptcache';
const model = args.model;
const out = args.out ?? 'soak-out';
const numClients = Number(args.clients ?? 32);
const seconds = Number(args.seconds ?? 600);
const cycle = Number(args.cycle ?? 120);
fs.mkdirSync(out, { recursive: true });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const now = () => performance.now();

// --- Redis and the server --------------------------------------------------
const redisPort = 21000 + Math.floor(Math.random() * 20000);
let redis = null;
async function startRedis() {
  redis = spawn('redis-server', ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
    '--loglevel', 'warning', '--maxmemory', '256mb', '--maxmemory-policy', 'allkeys-lru'], { stdio: 'ignore' });
  await sleep(300);
}
function stopRedis() { if (redis) { redis.kill('SIGKILL'); redis = null; } }

// The disk tier lives on a small tmpfs when we may mount one (root), so
// "disk full" is a real ENOSPC; otherwise on a plain directory, filled by
// replacing it with a file (every write then fails, as on a full disk).
const diskDir = path.resolve(out, 'disk');
fs.mkdirSync(diskDir, { recursive: true });
let tmpfs = false;
try {
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=96m', 'tmpfs', diskDir], { stdio: 'ignore' });
  tmpfs = true;
} catch { /* not allowed here */ }

const secret = path.join(out, 'tier-secret');
fs.writeFileSync(secret, 'soak-test secret, more than sixteen bytes\n');
const keys = path.join(out, 'keys');
fs.writeFileSync(keys, 'key-a tenant-a\nkey-b tenant-b\n');
await startRedis();
const serverLog = fs.openSync(path.join(out, 'serve.log'), 'w');
const server = spawn(bin, ['serve', '-m', model, '--port', '0', '--max-running', String(numClients),
  '--kv-cache-mem', String(24 << 20), '--host-cache-mem', String(32 << 20), '--disk-cache', diskDir,
  '--disk-cache-size', String(64 << 20), '--redis', `127.0.0.1:${redisPort}`, '--tier-secret-file', secret,
  '--api-key-file', keys], { stdio: ['ignore', 'ignore', 'pipe'] });
let serverText = '';
const port = await new Promise((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error('server did not start:\n' + serverText)), 120000);
  server.stderr.on('data', (d) => {
    serverText += d.toString();
    fs.writeSync(serverLog, d);
    const m = serverText.match(/listening on http:\/\/[^:]+:(\d+)/);
    if (m) { clearTimeout(timer); resolve(Number(m[1])); }
  });
});

function request(method, p, body, { key = 'key-a', abortAfterChunks } = {}) {
  return new Promise((resolve) => {
    const t0 = now();
    let first = null;
    const req = http.request({ host: '127.0.0.1', port, path: p, method,
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` } }, (res) => {
      let data = '';
      let chunks = 0;
      res.on('data', (d) => {
        data += d;
        // TTFT: the first event that carries generated text (not the role
        // chunk, not a keep-alive comment).
        if (first === null && /"(text|content)":"[^"]/.test(String(d))) first = now() - t0;
        chunks += 1;
        if (abortAfterChunks && chunks >= abortAfterChunks) {
          req.destroy();
          resolve({ status: res.statusCode, body: data, aborted: true, ttftMs: first, ms: now() - t0 });
        }
      });
      res.on('end', () => resolve({ status: res.statusCode, body: data, aborted: false, ttftMs: first, ms: now() - t0 }));
      res.on('error', () => resolve({ status: res.statusCode, body: data, aborted: true, ttftMs: first, ms: now() - t0 }));
    });
    req.on('error', (e) => resolve({ status: 0, body: String(e), aborted: !!abortAfterChunks, ttftMs: null, ms: now() - t0 }));
    req.end(body ? JSON.stringify(body) : undefined);
  });
}

// Prompts sharing long prefixes (a system prompt, a document), so the pool
// overflows into the tiers and requests come back to them.
const doc = 'The village by the river had a mill, a school, a bakery and a small library. '.repeat(12);
const systems = ['You are a storyteller for children. ', 'Answer in one short paragraph. ' + doc, doc + 'Questions follow. '];
const asks = ['Tell me about the mill.', 'Who works at the bakery?', 'What is in the library?', 'Describe the river.',
  'Write a poem about bread.', 'What happens in winter?'];
const prompts = [];
for (const s of systems) for (const a of asks) prompts.push(s + a);
const maxTokens = 32;
const tokensOf = (body) => [...body.matchAll(/"tokens":\[([\d,]*)\]/g)].flatMap((m) => m[1] ? m[1].split(',').map(Number) : []);
function completion(prompt, n, stream, cache = true) {
  return { prompt, max_tokens: n, temperature: 0, ignore_eos: true, stream, return_tokens: true, cache_prompt: cache };
}
async function metricsText() { return (await request('GET', '/metrics')).body; }
const metric = (text, name) => Number((text.match(new RegExp(`^${name} (\\S+)$`, 'm')) ?? [])[1] ?? NaN);

// References: each prompt with the cache off, alone, for both tenants (the
// tenant changes nothing but the cache namespace).
const refs = [];
for (const p of prompts) {
  const r = await request('POST', '/v1/completions', completion(p, maxTokens, false, false));
  assert.equal(r.status, 200, r.body);
  refs.push(JSON.parse(r.body).choices[0].tokens);
}
const idleUsed = metric(await metricsText(), 'promptcache_kv_pool_blocks\\{state="used"\\}');

// --- Faults ----------------------------------------------------------------
let fault = 'none';
const faultLog = [];
function setFault(name) { fault = name; faultLog.push({ t_s: Math.round((Date.now() - start) / 1000), fault: name }); }
function corruptDisk() {
  for (const f of fs.readdirSync(diskDir)) {
    if (!f.endsWith('.pcs')) continue;
    const p = path.join(diskDir, f);
    const fd = fs.openSync(p, 'r+');
    const size = fs.fstatSync(fd).size;
    for (let i = 0; i < 8; i++) fs.writeSync(fd, Buffer.from([0x5a]), 0, 1, 64 + Math.floor(Math.random() * Math.max(1, size - 64)));
    fs.closeSync(fd);
  }
}
const filler = path.join(diskDir, 'filler.bin');
function fillDisk() {
  if (tmpfs) {
    try { fs.writeFileSync(filler, Buffer.alloc(96 << 20)); } catch { /* ENOSPC: full, as intended */ }
  } else {
    fs.renameSync(diskDir, diskDir + '.away');
    fs.writeFileSync(diskDir, 'not a directory');
  }
}
function freeDisk() {
  if (tmpfs) fs.rmSync(filler, { force: true });
  else { fs.rmSync(diskDir, { force: true }); fs.renameSync(diskDir + '.away', diskDir); }
}
// One cycle: normal, Redis down, normal, disk corrupted, disk full.
const phases = [
  [0.2, () => setFault('none')],
  [0.2, () => { stopRedis(); setFault('redis_killed'); }],
  [0.2, async () => { await startRedis(); setFault('redis_restarted'); }],
  [0.2, () => { corruptDisk(); setFault('disk_corrupted'); }],
  [0.2, () => { fillDisk(); setFault('disk_full'); }],
];

// --- Clients and sampling ----------------------------------------------------
const start = Date.now();
const deadline = start + seconds * 1000;
const stats = { completed: 0, cancelled: 0, mismatches: 0, server_errors: 0, client_errors: 0, connection_errors: 0, tokens: 0 };
const byFault = {};
function record(f, r, stream) {
  const s = (byFault[f] ??= { n: 0, ttft: [], e2e: [] });
  s.n += 1;
  if (stream && r.ttftMs !== null) s.ttft.push(r.ttftMs);  // a non-stream's first byte is its last
  s.e2e.push(r.ms);
}
async function client(id) {
  let k = id * 7;
  while (Date.now() < deadline) {
    const which = k++ % prompts.length;
    const n = 4 + ((k * 5) % (maxTokens - 3));
    const stream = k % 2 === 0;
    const hangUp = id % 3 === 0 && k % 4 === 0;  // a stream that a third of the clients abandon
    const key = id % 2 ? 'key-a' : 'key-b';
    const f = fault;
    const r = await request('POST', '/v1/completions', completion(prompts[which], n, stream),
      { key, abortAfterChunks: hangUp && stream ? 1 + (k % 4) : undefined });
    if (r.status >= 500) stats.server_errors += 1;
    else if (r.status === 0 && !r.aborted) stats.connection_errors += 1;
    else if (r.status !== 200 && r.status !== 0) stats.client_errors += 1;
    else if (r.aborted) stats.cancelled += 1;
    else {
      const got = stream ? tokensOf(r.body) : JSON.parse(r.body).choices[0].tokens;
      stats.tokens += got.length;
      if (JSON.stringify(got) !== JSON.stringify(refs[which].slice(0, n))) stats.mismatches += 1;
      stats.completed += 1;
      record(f, r, stream);
    }
  }
}
const rss = [];
const sampler = setInterval(() => {
  try {
    const m = fs.readFileSync(`/proc/${server.pid}/status`, 'utf8').match(/VmRSS:\s+(\d+) kB/);
    if (m) rss.push(Number(m[1]) / 1024);
  } catch { /* gone */ }
  process.stderr.write(`\r${Math.max(0, Math.round((deadline - Date.now()) / 1000))} s left, fault ${fault}: ` +
    `${stats.completed} completed, ${stats.cancelled} hung up, ${stats.mismatches} mismatches, ${stats.server_errors} 5xx   `);
}, 1000);
const faults = (async () => {
  for (let c = 0; Date.now() < deadline; c++) {
    for (const [frac, act] of phases) {
      if (Date.now() >= deadline) break;
      await act();
      await sleep(frac * cycle * 1000);
    }
    freeDisk();
  }
})();
await Promise.all(Array.from({ length: numClients }, (_, i) => client(i)));
clearInterval(sampler);
await faults;
process.stderr.write('\n');
if (!redis) await startRedis();

// --- After: the pool back to idle, tiers' counters, memory -----------------
let after = await metricsText();
for (let i = 0; i < 100 && metric(after, 'promptcache_kv_pool_blocks\\{state="used"\\}') !== idleUsed; i++) {
  await sleep(100);
  after = await metricsText();
}
const pct = (xs, p) => { const s = [...xs].sort((a, b) => a - b); return s.length ? s[Math.min(s.length - 1, Math.floor(p * s.length))] : null; };
const latency = Object.fromEntries(Object.entries(byFault).map(([f, s]) => [f, {
  requests: s.n, ttft_ms_p50: pct(s.ttft, 0.5), ttft_ms_p99: pct(s.ttft, 0.99), e2e_ms_p50: pct(s.e2e, 0.5) }]));
const third = Math.floor(rss.length / 3);
const mid = Math.max(...rss.slice(third, 2 * third)), last = Math.max(...rss.slice(2 * third));
const tierCounter = (name, tier) => metric(after, `${name}\\{tier="${tier}"\\}`);
const report = {
  clients: numClients, seconds, cycle_s: cycle, disk_on_tmpfs: tmpfs, ...stats,
  idle_used_blocks: idleUsed, after_used_blocks: metric(after, 'promptcache_kv_pool_blocks\\{state="used"\\}'),
  rss_mb: { first: rss[0], middle_third_max: mid, last_third_max: last, max: Math.max(...rss) },
  latency_by_fault: latency,
  tiers: Object.fromEntries(['host', 'disk', 'redis'].map((t) => [t, {
    hit_tokens: tierCounter('promptcache_prefix_cache_hit_tokens_total', t),
    corrupt: tierCounter('promptcache_tier_corrupt_blocks_total', t),
    dropped: tierCounter('promptcache_tier_dropped_blocks_total', t),
    rejected: tierCounter('promptcache_tier_rejected_blocks_total', t),
    healthy_now: tierCounter('promptcache_tier_healthy', t) }])),
  faults: faultLog,
};
server.kill('SIGTERM');
const exitCode = await new Promise((r) => server.on('exit', (code) => r(code)));
report.server_exit_code = exitCode;
stopRedis();
if (tmpfs) { try { execFileSync('umount', [diskDir]); } catch { /* busy */ } }
fs.writeFileSync(path.join(out, 'soak.json'), JSON.stringify(report, null, 2));
console.log(JSON.stringify(report, null, 2));
const checks = [
  ['zero wrong tokens', stats.mismatches === 0],
  ['zero 5xx, no refused connections, no 4xx', stats.server_errors === 0 && stats.connection_errors === 0 && stats.client_errors === 0],
  ['requests completed and hung up', stats.completed > 0 && stats.cancelled > 0],
  ['no leaked blocks', report.after_used_blocks === idleUsed],
  ['resident memory bounded', last <= mid * 1.1 + 32],
  ['clean exit', exitCode === 0],
];
for (const [name, ok] of checks) console.log(`${ok ? 'ok  ' : 'FAIL'} ${name}`);
process.exit(checks.every(([, ok]) => ok) ? 0 : 1);
