// Issue 33's acceptance on a real `portal dev` replica with real kubectl and
// a real Prometheus: after a few hundred mixed allow/deny requests, PromQL
// over the replica's /metrics answers "denials per rule" and "p99 per rule",
// and each denial's log line is in the replica's log file. Issue 31: 150
// rules created, evaluated and deleted leave none of their series on /metrics.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { stringify } from 'yaml';
import { until } from '../support/until.ts';
import { kubectl, startDevFor } from './support.ts';

const rule = (name: string, enforcement: string, expression: string, kinds = ['Pod'], labels: Record<string, string> = {}) => ({
  apiVersion: 'portal.dev/v1alpha1',
  kind: 'PortalClusterRule',
  metadata: { name, labels },
  spec: { enforcement, match: { kinds: [{ apiGroups: [''], kinds }] }, validate: { message: name, cel: { expressions: [{ expression }] } } },
});

const pod = (name: string, privileged: boolean, image = 'nginx:1.27') => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace: 'default' },
  spec: { containers: [{ name: 'app', image, securityContext: { privileged } }] },
});

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

async function promQuery(base: string, query: string): Promise<{ metric: Record<string, string>; value: [number, string] }[]> {
  const res = await fetch(`${base}/api/v1/query?query=${encodeURIComponent(query)}`, { signal: AbortSignal.timeout(5000) });
  const body = (await res.json()) as { status: string; data: { result: { metric: Record<string, string>; value: [number, string] }[] } };
  assert.equal(body.status, 'success', query);
  return body.data.result;
}

void test('a day of kubectl traffic: Prometheus answers denials and p99 per rule, the log has every denial; 150 deleted rules leave no series', { timeout: 600_000 }, async (t) => {
  const dev = await startDevFor(t, {
    name: 'dev-observability',
    replicas: 1,
    policies: {
      'rules.yaml': [rule('deny-privileged', 'Deny', 'object.spec.containers.all(c, !c.?securityContext.?privileged.orValue(false))'), rule('warn-latest', 'Warn', "object.spec.containers.all(c, !c.image.endsWith(':latest'))")]
        .map((r) => stringify(r))
        .join('---\n'),
    },
    // Each denial's log line is written at info.
    logLevel: 'info',
    outputTail: 20_000,
    readyMs: 120_000,
  });
  const { dir, state } = dev;
  const stateDir = join(dir, 'state');
  const kc = state.kubeconfig;
  const replica = state.replicas[0]!;
  await until('the rules in force', 60_000, async () => ((await (await fetch(`${replica.probes}/metrics`)).text()).match(/^portal_rules_loaded 2$/m) ? true : undefined));

  // 240 requests in two kubectl runs: 160 allowed (80 creates, then 80 updates), 80 denied, 40 of them warned too.
  const docs = Array.from({ length: 120 }, (_, i) => pod(`web-${i}`, i % 3 === 0, i % 6 === 0 ? 'nginx:latest' : 'nginx:1.27'));
  const file = join(dir, 'pods.yaml');
  await writeFile(file, docs.map((d) => stringify(d)).join('---\n'));
  for (let round = 0; round < 2; round++) {
    const r = await kubectl(kc, ['apply', '-f', file]);
    assert.equal((r.stderr.match(/denied the request: deny-privileged/g) ?? []).length, 40, r.stderr);
  }

  // A real Prometheus scrapes the replica; PromQL answers per rule.
  const port = await freePort();
  const config = join(dir, 'prometheus.yml');
  const target = new URL(replica.probes).host;
  await writeFile(config, stringify({ global: { scrape_interval: '1s' }, scrape_configs: [{ job_name: 'portal', static_configs: [{ targets: [target] }] }] }));
  const prometheus = spawn('prometheus', [`--config.file=${config}`, `--storage.tsdb.path=${join(dir, 'tsdb')}`, `--web.listen-address=127.0.0.1:${port}`], { stdio: 'ignore' });
  const promExited = new Promise((resolve) => prometheus.on('exit', resolve));
  t.after(async () => {
    if (prometheus.exitCode === null) prometheus.kill('SIGTERM');
    await promExited;
  });
  const base = `http://127.0.0.1:${port}`;
  const denials = await until('Prometheus to have scraped the replica', 120_000, async () => {
    try {
      const r = await promQuery(base, 'sum by (rule) (portal_admission_results_total{result="fail"})');
      return r.length > 0 ? r : undefined;
    } catch {
      return undefined;
    }
  });
  assert.deepEqual(denials.map((r) => [r.metric.rule, Number(r.value[1])]), [['deny-privileged', 80]]);
  const warned = await promQuery(base, 'sum by (rule) (portal_admission_results_total{result="warn"})');
  assert.deepEqual(warned.map((r) => [r.metric.rule, Number(r.value[1])]), [['warn-latest', 40]]);
  const p99 = await promQuery(base, 'histogram_quantile(0.99, sum by (rule, le) (portal_admission_rule_duration_seconds_bucket))');
  assert.deepEqual(p99.map((r) => r.metric.rule).sort(), ['deny-privileged', 'warn-latest']);
  for (const r of p99) assert.ok(Number(r.value[1]) > 0 && Number(r.value[1]) <= 1, `p99 of ${r.metric.rule}: ${r.value[1]} s`);

  // Every denial's line is in the replica's log file.
  const log = (await readFile(join(stateDir, 'logs', `${replica.name}.log`), 'utf8')).split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
  const lines = log.filter((l) => l.msg === 'admission request denied');
  assert.equal(lines.length, 80);
  for (const l of lines) {
    assert.deepEqual(l.rules, ['deny-privileged']);
    assert.equal(l.kind, 'Pod');
    assert.match(String(l.name), /^web-\d+$/);
    assert.equal(typeof l.user, 'string');
  }

  // 150 rules created, evaluated (a Pod matches them all), deleted: none of their series stays.
  const churn = Array.from({ length: 150 }, (_, i) => rule(`churn-${i}`, i % 2 ? 'Deny' : 'Warn', 'object.spec.containers.size() >= 0', ['Pod'], { churn: 'test' }));
  const churnFile = join(dir, 'churn.yaml');
  await writeFile(churnFile, churn.map((r) => stringify(r)).join('---\n'));
  const applied = await kubectl(kc, ['apply', '-f', churnFile]);
  assert.equal(applied.code, 0, applied.stderr);
  await until('150 more rules in force', 120_000, async () => ((await (await fetch(`${replica.probes}/metrics`)).text()).match(/^portal_rules_loaded 152$/m) ? true : undefined));
  const created = await kubectl(kc, ['run', 'churn-probe', '--image=nginx:1.27']);
  assert.equal(created.code, 0, created.stderr);
  const during = await (await fetch(`${replica.probes}/metrics`)).text();
  assert.equal((during.match(/^portal_admission_results_total\{rule="churn-\d+"/gm) ?? []).length, 150);
  const deleted = await kubectl(kc, ['delete', 'portalclusterrules', '-l', 'churn=test']);
  assert.equal(deleted.code, 0, deleted.stderr);
  await until('no series of a deleted rule', 120_000, async () => {
    const text = await (await fetch(`${replica.probes}/metrics`)).text();
    return /^portal_rules_loaded 2$/m.test(text) && !text.includes('churn-') ? true : undefined;
  });
});
