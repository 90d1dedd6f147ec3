// Starts `promptcache serve --port 0` and resolves with the process and the
// port it printed once it listens.
import { spawn } from 'node:child_process';
import fs from 'node:fs';

// Exit code 77 tells CTest the test was skipped.
function skipOrFail(msg) {
  if (process.env.PROMPTCACHE_REQUIRE_SHARED === '1') throw new Error(msg);
  console.error('SKIP: ' + msg);
  process.exit(77);
}

export function startServer(bin, model, extra = []) {
  if (!fs.existsSync(model)) skipOrFail(`shared model ${model} not found (../shared absent)`);
  return new Promise((resolve, reject) => {
    const proc = spawn(bin, ['serve', '-m', model, '--port', '0', ...extra], { stdio: ['ignore', 'inherit', 'pipe'] });
    let log = '';
    const timer = setTimeout(() => reject(new Error('server did not start:\n' + log)), 60000);
    proc.stderr.on('data', (d) => {
      log += d.toString();
      process.stderr.write(d);
      const m = log.match(/listening on http:\/\/[^:]+:(\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve({ proc, port: Number(m[1]), exited: new Promise((r) => proc.on('exit', (code) => r(code))) });
      }
    });
    proc.on('exit', (code) => reject(new Error(`server exited with ${code}:\n${log}`)));
  });
}

export async function importOpenAI() {
  try {
    return (await import('openai')).default;
  } catch (e) {
    skipOrFail('the openai npm package is not installed (scripts/test.sh runs npm ci in tests/node)');
  }
}
