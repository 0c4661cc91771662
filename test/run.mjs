// Runs every *.test.ts under test/ with node:test through tsx. Node 20's
// `--test` does not expand globs itself, so the files are found here.
//
// Two phases: the in-process suites run two files at a time; the suites that
// start whole clusters of processes (`portal dev` with several replicas, the
// exactly-once e2e, the bench smoke runs) run one file at a time afterwards. On a 2-core machine two
// of those side by side starve each other's lease renewals, and a test that
// fails because the machine is busy is a broken test.
import { spawn } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { requireNode } from '../bin/require-node.js';

requireNode('npm test');

const root = fileURLToPath(new URL('..', import.meta.url));
const SERIAL = ['test/bench/', 'test/replica/', 'test/audit-e2e/', 'test/dev/dev.test.ts', 'test/dev/exceptions.test.ts', 'test/dev/rule-lifecycle.test.ts', 'test/dev/supervisor.test.ts', 'test/dev/truth.test.ts', 'test/chart/rbac-e2e.test.ts', 'test/hostile/connection-floods.test.ts', 'test/hostile/webhook-port.test.ts', 'test/hostile/fair-shares.test.ts', 'test/hostile/memory-poison.test.ts', 'test/hostile/rule-churn.test.ts', 'test/hostile/rule-flood.test.ts', 'test/hostile/rule-check-flood.test.ts', 'test/dev/observability.test.ts', 'test/dev/denial-events.test.ts', 'test/dev/type-check.test.ts'];

const filter = process.argv.slice(2);
const files = [];
(function walk(dir) {
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) walk(path);
    else if (entry.endsWith('.test.ts')) files.push(relative(root, path).split('\\').join('/'));
  }
})(join(root, 'test'));
files.sort();
const selected = filter.length ? files.filter((f) => filter.some((p) => f.includes(p))) : files;
const isSerial = (f) => SERIAL.some((s) => (s.endsWith('/') ? f.startsWith(s) : f === s));

function run(list, concurrency) {
  if (list.length === 0) return Promise.resolve(0);
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', '--test', `--test-concurrency=${concurrency}`, ...list], {
      cwd: root,
      stdio: 'inherit',
    });
    child.on('exit', (code, signal) => resolve(signal ? 1 : (code ?? 1)));
  });
}

const parallel = await run(selected.filter((f) => !isSerial(f)), 2);
const serial = await run(selected.filter(isSerial), 1);
process.exit(parallel || serial);
