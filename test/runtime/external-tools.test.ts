/**
 * Issue 34 item 6: a suite that needs an external program fails at once,
 * naming the package, when the program is missing (before, Alertmanager's
 * contract tests waited until they were cancelled).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ALERTMANAGER, PROMTOOL, requireTool, UNZIP } from '../support/external-tool.ts';

test('a tool missing from PATH throws at once, naming what to install', (t) => {
  const saved = process.env.PATH;
  t.after(() => (process.env.PATH = saved));
  process.env.PATH = '/nonexistent-portal-bin';
  assert.throws(() => requireTool(PROMTOOL), /^Error: promtool is not installed: apt-get install prometheus \(Debian's package brings promtool\); \.ci\/run installs it$/);
  assert.throws(() => requireTool(UNZIP), /^Error: unzip is not installed: apt-get install unzip; /);
});

test('a tool at a fixed path that is not there names its package', () => {
  assert.throws(() => requireTool({ ...ALERTMANAGER, command: '/nonexistent/prometheus-alertmanager' }), /prometheus-alertmanager is not installed: apt-get install prometheus-alertmanager/);
});

test('the tools CI installs are found on this machine', () => {
  for (const tool of [ALERTMANAGER, PROMTOOL, UNZIP]) assert.match(requireTool(tool), /\//);
});
