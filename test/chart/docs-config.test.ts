// docs/operations.md must stay in step with the configuration schema and the
// chart: every flag documented with its YAML key, every flag the chart passes
// known to `portal serve`, and the example alert rules valid for Prometheus.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { PROMTOOL, requireTool } from '../support/external-tool.ts';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { SERVE_OPTIONS } from '../../src/config/options.ts';
import { find, render } from './helm.ts';

const docsDir = fileURLToPath(new URL('../../docs', import.meta.url));

void test('docs/operations.md documents every portal serve flag with its YAML key', async () => {
  const doc = await readFile(join(docsDir, 'operations.md'), 'utf8');
  const rows = new Map<string, string>();
  for (const line of doc.split('\n')) {
    const m = /^\| `--([a-z-]+)[^`]*` \| `([A-Za-z]+)` \|/.exec(line);
    if (m) rows.set(m[1]!, m[2]!);
  }
  for (const opt of SERVE_OPTIONS) {
    assert.equal(rows.get(opt.flag), opt.key, `--${opt.flag} documented with key ${opt.key}`);
  }
  const known = new Set(SERVE_OPTIONS.map((o) => o.flag));
  for (const flag of rows.keys()) assert.ok(known.has(flag), `documented flag --${flag} exists`);
});

void test('every flag the chart passes to portal serve exists', async () => {
  const ms = await render({ alertmanager: { urls: ['http://am:9093'] }, webhook: { excludedNamespaces: ['monitoring'] }, exceptions: { namespaces: ['ops', 'portal-system'], maxLifetime: '720h' }, denials: { events: true } });
  const spec = find(ms, 'Deployment')['spec'] as { template: { spec: { containers: { args: string[] }[] } } };
  const args = spec.template.spec.containers[0]!.args;
  assert.ok(args.includes('--exception-namespaces=ops,portal-system') && args.includes('--max-exception-lifetime=720h'), args.join(' '));
  assert.ok(args.includes('--denial-events=true'), args.join(' '));
  // Defaults: none of these flags (the server's defaults are the release namespace, no limit, no denial Events).
  const plain = (find(await render(), 'Deployment')['spec'] as typeof spec).template.spec.containers[0]!.args;
  assert.ok(!plain.some((a) => a.startsWith('--exception-namespaces') || a.startsWith('--max-exception-lifetime') || a.startsWith('--denial-events')), plain.join(' '));
  assert.equal(args[0], 'serve');
  const known = new Set(SERVE_OPTIONS.map((o) => o.flag));
  for (const arg of args.slice(1)) {
    const flag = /^--([a-z-]+)=/.exec(arg)?.[1];
    assert.ok(flag !== undefined && known.has(flag), `portal serve knows ${arg}`);
  }
});

void test('the example alert rules in docs/operations.md pass promtool check rules', async (t) => {
  const doc = await readFile(join(docsDir, 'operations.md'), 'utf8');
  const block = /### Example alerting rules[\s\S]*?```yaml\n([\s\S]*?)```/.exec(doc)?.[1];
  assert.ok(block, 'the alert rules block exists');
  const dir = await mkdtemp(join(tmpdir(), 'portal-rules-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const file = join(dir, 'rules.yaml');
  await writeFile(file, block);
  const promtool = requireTool(PROMTOOL);
  const result = await new Promise<{ code: number; out: string }>((resolve) => {
    execFile(promtool, ['check', 'rules', file], (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 127) : 0, out: stdout + stderr });
    });
  });
  assert.equal(result.code, 0, result.out);
  assert.match(result.out, /SUCCESS: 10 rules found/);
});
