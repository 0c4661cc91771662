// The chart's monitoring objects (issue 33, Deliver 4): off by default; when
// on, a ServiceMonitor on the Service's metrics port, a PrometheusRule whose
// alerts pass the real `promtool check rules` and `promtool test rules`
// (each alert fires and resolves), runbook links to anchors that exist, and
// a Grafana dashboard whose every expression, like every alert's, names
// only metrics a replica exposes (docs/operations.md's table, which
// test/replica/rule-series.test.ts compares with a real replica's /metrics).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { stringify } from 'yaml';
import { find, render, type Manifest } from './helm.ts';
import { alertTests } from './monitoring-alert-tests.ts';

const root = new URL('../../', import.meta.url).pathname;
const ON = { monitoring: { serviceMonitor: { enabled: true }, prometheusRule: { enabled: true }, grafanaDashboard: { enabled: true } } };

function promtool(args: string[], cwd: string): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile('promtool', args, { cwd, timeout: 60_000 }, (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, output: `${stdout}${stderr}` }));
  });
}

interface Rule {
  alert: string;
  expr: string;
  annotations: Record<string, string>;
}

/** Metric names an expression reads: Portal's own and the standard process/Node.js families, histogram suffixes folded. */
function metricNames(expr: string): string[] {
  const names = [...expr.matchAll(/\b((?:portal|process|nodejs)_[a-z0-9_]+)/g)].map((m) => m[1]!);
  return [...new Set(names.map((n) => n.replace(/_(bucket|sum|count)$/, '')))];
}

async function exposedFamilies(): Promise<(name: string) => boolean> {
  const text = await readFile(join(root, 'docs', 'operations.md'), 'utf8');
  const start = text.indexOf('\n## Metrics\n');
  const rows = [...text.slice(start, text.indexOf('\n### ', start)).matchAll(/^\| `([a-z_:*]+)` \|/gm)].map((m) => m[1]!);
  return (name) => rows.some((row) => (row.endsWith('*') ? name.startsWith(row.slice(0, -1)) : row === name));
}

test('monitoring objects are off by default', async () => {
  const manifests = await render();
  for (const kind of ['ServiceMonitor', 'PrometheusRule']) assert.equal(manifests.filter((m) => m.kind === kind).length, 0, kind);
  assert.equal(manifests.filter((m) => m.kind === 'ConfigMap' && m.metadata.name.endsWith('-dashboard')).length, 0);
});

test('the ServiceMonitor scrapes the Service\'s metrics port', async () => {
  const manifests = await render(ON);
  const sm = find(manifests, 'ServiceMonitor') as Manifest & { spec: { selector: { matchLabels: Record<string, string> }; endpoints: { port: string; path: string }[] } };
  const svc = find(manifests, 'Service') as Manifest & { spec: { ports: { name: string }[] } };
  for (const [k, v] of Object.entries(sm.spec.selector.matchLabels)) assert.equal(svc.metadata.labels?.[k], v, `the Service carries ${k}=${v}`);
  assert.deepEqual(sm.spec.endpoints.map((e) => [e.port, e.path]), [['metrics', '/metrics']]);
  assert.ok(svc.spec.ports.some((p) => p.name === 'metrics'));
});

test('the PrometheusRule passes promtool check rules and promtool test rules: every alert fires and resolves', { timeout: 120_000 }, async (t) => {
  const manifests = await render(ON);
  const groups = (find(manifests, 'PrometheusRule') as Manifest & { spec: { groups: { rules: Rule[] }[] } }).spec.groups;
  const dir = await mkdtemp(join(tmpdir(), 'portal-alerts-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, 'rules.yaml'), stringify({ groups }));
  const check = await promtool(['check', 'rules', 'rules.yaml'], dir);
  assert.equal(check.code, 0, check.output);
  const rules = groups.flatMap((g) => g.rules);
  const tests = alertTests(Object.fromEntries(rules.map((r) => [r.alert, r.annotations])));
  // One firing and one resolved check per shipped alert: a new alert without a test fails here.
  assert.deepEqual([...new Set(tests.flatMap((x) => x.alert_rule_test.map((a) => a.alertname)))].sort(), rules.map((r) => r.alert).sort());
  await writeFile(join(dir, 'tests.yaml'), stringify({ rule_files: ['rules.yaml'], evaluation_interval: '1m', tests }));
  const run = await promtool(['test', 'rules', 'tests.yaml'], dir);
  assert.equal(run.code, 0, run.output);
});

test('every alert links to a runbook anchor that exists, and names only metrics a replica exposes', async () => {
  const manifests = await render(ON);
  const rules = (find(manifests, 'PrometheusRule') as Manifest & { spec: { groups: { rules: Rule[] }[] } }).spec.groups.flatMap((g) => g.rules);
  const runbooks = await readFile(join(root, 'docs', 'runbooks.md'), 'utf8');
  const anchors = new Set([...runbooks.matchAll(/^#+ (.+)$/gm)].map((m) => m[1]!.toLowerCase().replace(/[^a-z0-9 -]/g, '').replace(/ /g, '-')));
  const exposed = await exposedFamilies();
  for (const r of rules) {
    const url = r.annotations.runbook_url ?? '';
    assert.match(url, /^https:\/\/github\.com\/portal-dev\/portal\/blob\/main\/docs\/runbooks\.md#/, r.alert);
    assert.ok(anchors.has(url.split('#')[1]!), `${r.alert}: docs/runbooks.md has a heading for #${url.split('#')[1]}`);
    const names = metricNames(r.expr);
    assert.ok(names.length > 0, `${r.alert} reads a Portal metric`);
    for (const n of names) assert.ok(exposed(n), `${r.alert}: ${n} is exposed by a replica`);
  }
});

test('the Grafana dashboard is labelled for the sidecar and every panel names only metrics a replica exposes', async () => {
  const manifests = await render(ON);
  const cm = manifests.find((m) => m.kind === 'ConfigMap' && m.metadata.name.endsWith('-dashboard')) as Manifest & { data: Record<string, string> };
  assert.equal(cm.metadata.labels?.grafana_dashboard, '1');
  const dashboard = JSON.parse(cm.data['portal.json']!) as { panels: { title: string; targets: { expr: string }[] }[] };
  const exposed = await exposedFamilies();
  const titles = dashboard.panels.map((p) => p.title.toLowerCase()).join(' | ');
  for (const topic of ['by rule', 'latency', 'readiness', 'errors', 'leader', 'audit', 'reports']) assert.ok(titles.includes(topic), `a panel about ${topic}`);
  for (const p of dashboard.panels) {
    for (const target of p.targets) {
      const names = metricNames(target.expr);
      assert.ok(names.length > 0, `${p.title}: ${target.expr} reads a metric`);
      for (const n of names) assert.ok(exposed(n), `${p.title}: ${n} is exposed by a replica`);
    }
  }
});
