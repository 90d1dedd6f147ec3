// SIGTERM drains: a stream in flight finishes with all its tokens, new
// requests are refused meanwhile, and the process exits 0.
// Usage: node drain.mjs PROMPTCACHE_BINARY MODEL.gguf
import assert from 'node:assert/strict';
import http from 'node:http';
import { startServer } from './serve.mjs';

const [bin, model] = process.argv.slice(2);
// A generous drain deadline: the point is that the stream completes, and a
// loaded CI machine may run it slowly.
const { proc, port, exited } = await startServer(bin, model, ['--drain-timeout', '240']);

function post(path, body, onChunk) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, method: 'POST', headers: { 'Content-Type': 'application/json' } }, (res) => {
      let data = '';
      res.on('data', (d) => { data += d; if (onChunk) onChunk(d.toString()); });
      res.on('end', () => resolve({ status: res.statusCode, body: data }));
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

const n = 1500;
let signalled = false;
let refused = null;
const streaming = post('/v1/completions', { prompt: 'Once upon a time', max_tokens: n, ignore_eos: true, stream: true,
  return_tokens: true }, () => {
  if (signalled) return;
  signalled = true;
  proc.kill('SIGTERM');
  // Give the signal a moment to land, then knock: new work is refused.
  refused = new Promise((r) => setTimeout(r, 100)).then(() => post('/v1/completions', { prompt: 'Hi', max_tokens: 2 }));
});
const res = await streaming;
const late = await refused;
assert.equal(late.status, 503, `a request during the drain got ${late.status}`);
assert.ok(JSON.parse(late.body).error.message.length > 0);
assert.equal(res.status, 200);
assert.ok(res.body.includes('data: [DONE]'), 'stream was cut short');
const tokens = [...res.body.matchAll(/"tokens":\[(\d+)\]/g)].length;
assert.equal(tokens, n, `expected ${n} tokens, got ${tokens}`);
assert.ok(res.body.includes('"finish_reason":"length"'));
const code = await exited;
assert.equal(code, 0);
console.log(`ok: the in-flight stream finished all ${n} tokens after SIGTERM; exit code ${code}`);
