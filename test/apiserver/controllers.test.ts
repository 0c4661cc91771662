/**
 * Workload controllers and the simulated node, through the real kubectl 1.35
 * against the embedded API server (packages/devcluster/src/controllers/).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import type { AdmissionAttributes, AdmissionHook } from '../../packages/devcluster/src/apiserver/index.ts';
import { kubectlPath } from '../support/tools.ts';
import { caller, withServer } from './helpers.ts';

const run = promisify(execFile);

interface Kubectl {
  k: (...args: string[]) => Promise<string>;
  /** Runs kubectl expecting failure; returns stderr. */
  fails: (...args: string[]) => Promise<string>;
  done: () => void;
}

function kubectl(kubeconfigYaml: string): Kubectl {
  const dir = mkdtempSync(join(tmpdir(), 'portal-ctrl-'));
  const kubeconfig = join(dir, 'kubeconfig');
  writeFileSync(kubeconfig, kubeconfigYaml);
  const opts = { env: { PATH: process.env['PATH'] ?? '', HOME: dir }, timeout: 60_000 };
  return {
    k: async (...args) => (await run(kubectlPath(), ['--kubeconfig', kubeconfig, ...args], opts)).stdout,
    fails: async (...args) => {
      try {
        await run(kubectlPath(), ['--kubeconfig', kubeconfig, ...args], opts);
      } catch (e) {
        return String((e as { stderr?: string }).stderr ?? '');
      }
      throw new Error(`kubectl ${args.join(' ')} succeeded; expected a failure`);
    },
    done: () => rmSync(dir, { recursive: true, force: true }),
  };
}

test('Deployment: create, rollout status, scale, set image rolls out a new ReplicaSet', { timeout: 120_000 }, () => withServer({ controllers: true }, async (s) => {
  const { k, done } = kubectl(s.kubeConfig('admin'));
  try {
    assert.match(await k('create', 'deployment', 'web', '--image=nginx:1', '--replicas=3'), /deployment.apps\/web created/);
    assert.match(await k('rollout', 'status', 'deployment/web', '--timeout=60s'), /deployment "web" successfully rolled out/);
    const pods = JSON.parse(await k('get', 'pods', '-l', 'app=web', '-o', 'json')) as { items: { metadata: { ownerReferences: { kind: string; controller: boolean }[] }; spec: { nodeName: string }; status: Record<string, unknown> }[] };
    assert.equal(pods.items.length, 3);
    for (const p of pods.items) {
      assert.equal(p.spec.nodeName, 'portal-dev-node');
      assert.equal(p.status['phase'], 'Running');
      assert.match(String(p.status['podIP']), /^10\.244\.\d+\.\d+$/);
      assert.equal(p.status['hostIP'], '172.18.0.2');
      assert.ok(p.status['startTime']);
      assert.deepEqual((p.status['containerStatuses'] as { ready: boolean }[]).map((c) => c.ready), [true]);
      assert.ok((p.status['conditions'] as { type: string; status: string }[]).some((c) => c.type === 'Ready' && c.status === 'True'));
      assert.equal(p.metadata.ownerReferences[0]?.kind, 'ReplicaSet');
    }
    const status = JSON.parse(await k('get', 'deployment', 'web', '-o', 'jsonpath={.status}')) as Record<string, unknown>;
    assert.equal(status['readyReplicas'], 3);
    assert.equal(status['availableReplicas'], 3);
    assert.equal(status['updatedReplicas'], 3);
    const conds = status['conditions'] as { type: string; reason: string }[];
    assert.equal(conds.find((c) => c.type === 'Available')?.reason, 'MinimumReplicasAvailable');
    assert.equal(conds.find((c) => c.type === 'Progressing')?.reason, 'NewReplicaSetAvailable');

    assert.match(await k('scale', 'deployment/web', '--replicas=5'), /deployment.apps\/web scaled/);
    assert.match(await k('rollout', 'status', 'deployment/web', '--timeout=60s'), /successfully rolled out/);
    assert.equal(await k('get', 'deployment', 'web', '-o', 'jsonpath={.status.readyReplicas}'), '5');

    assert.match(await k('set', 'image', 'deployment/web', 'nginx=nginx:2'), /image updated/);
    assert.match(await k('rollout', 'status', 'deployment/web', '--timeout=60s'), /successfully rolled out/);
    const rss = JSON.parse(await k('get', 'rs', '-l', 'app=web', '-o', 'json')) as { items: { spec: { replicas: number; template: { spec: { containers: { image: string }[] } } }; metadata: { annotations: Record<string, string> } }[] };
    assert.equal(rss.items.length, 2);
    const byImage = new Map(rss.items.map((r) => [r.spec.template.spec.containers[0]!.image, r]));
    assert.equal(byImage.get('nginx:1')?.spec.replicas, 0);
    assert.equal(byImage.get('nginx:2')?.spec.replicas, 5);
    assert.equal(byImage.get('nginx:2')?.metadata.annotations['deployment.kubernetes.io/revision'], '2');
    assert.equal(await k('get', 'pods', '-l', 'app=web', '-o', 'jsonpath={.items[*].spec.containers[0].image}'), 'nginx:2 nginx:2 nginx:2 nginx:2 nginx:2');
    const events = await k('get', 'events', '--field-selector', 'involvedObject.kind=Deployment', '-o', 'jsonpath={.items[*].message}');
    assert.match(events, /Scaled up replica set web-\w+ from 0 to 3/);

    // kubectl scale on a ReplicaSet goes through the same scale subresource.
    const rsName = (await k('get', 'rs', '-l', 'app=web', '-o', 'jsonpath={.items[?(@.spec.replicas==0)].metadata.name}')).trim();
    assert.match(await k('get', '--raw', `/apis/apps/v1/namespaces/default/replicasets/${rsName}/scale`), /"kind":"Scale"/);

    // Garbage collection: deleting the Deployment removes its ReplicaSets and Pods.
    await k('delete', 'deployment', 'web');
    await k('wait', '--for=delete', 'pods', '-l', 'app=web', '--timeout=30s');
    assert.equal(await k('get', 'rs', '-l', 'app=web', '-o', 'name'), '');
  } finally {
    done();
  }
}));

test('Job completes; a CronJob makes Jobs (kubectl create job --from, and on schedule with an injected clock)', { timeout: 120_000 }, async () => {
  // The controllers' clock, moved forward below so the CronJob's "* * * * *" fires within seconds.
  let offset = 0;
  await withServer({ controllers: { podCompleteAfterMs: 200, now: () => Date.now() + offset } }, async (s) => {
    const { k, done } = kubectl(s.kubeConfig('admin'));
    try {
      assert.match(await k('create', 'job', 'once', '--image=busybox'), /job.batch\/once created/);
      assert.match(await k('wait', '--for=condition=complete', 'job/once', '--timeout=60s'), /condition met/);
      assert.equal(await k('get', 'job', 'once', '-o', 'jsonpath={.status.succeeded}'), '1');
      assert.equal(await k('get', 'pods', '-l', 'job-name=once', '-o', 'jsonpath={.items[*].status.phase}'), 'Succeeded');

      // Jump the clock to 5 s before a minute boundary (never backwards): the CronJob is
      // created before that boundary, however fast or slow the steps above were, and a
      // CronJob runs only for scheduled times after its creation.
      const fake = Date.now() + offset;
      offset += Math.ceil((fake + 5000) / 60_000) * 60_000 - 5000 - fake;
      const minute = Math.floor((Date.now() + offset) / 60_000) + 1;
      assert.match(await k('create', 'cronjob', 'tick', '--image=busybox', '--schedule=* * * * *'), /cronjob.batch\/tick created/);
      assert.match(await k('create', 'job', 'manual', '--from=cronjob/tick'), /job.batch\/manual created/);
      assert.match(await k('wait', '--for=condition=complete', 'job/manual', '--timeout=60s'), /condition met/);
      // The scheduled run: a Job named tick-<minutes since epoch>, owned by the CronJob.
      await k('wait', '--for=create', `job/tick-${minute}`, '--timeout=60s');
      assert.match(await k('wait', '--for=condition=complete', `job/tick-${minute}`, '--timeout=60s'), /condition met/);
      const jobs = await k('get', 'jobs', '-o', 'jsonpath={range .items[*]}{.metadata.name} {.metadata.ownerReferences[0].kind}{"\\n"}{end}');
      assert.match(jobs, /^tick-\d+ CronJob$/m);
      assert.match(await k('get', 'cronjob', 'tick', '-o', 'jsonpath={.status.lastScheduleTime}'), /^\d{4}-\d\d-\d\dT\d\d:\d\d:00Z$/);
    } finally {
      done();
    }
  });
});

test('logs and exec say portal dev has no container runtime', { timeout: 60_000 }, () => withServer({ controllers: true }, async (s) => {
  const { k, fails, done } = kubectl(s.kubeConfig('admin'));
  try {
    await k('run', 'p', '--image=nginx');
    await k('wait', '--for=condition=Ready', 'pod/p', '--timeout=30s');
    assert.match(await fails('logs', 'p'), /portal dev has no container runtime: pods\/log is not available/);
    assert.match(await fails('exec', 'p', '--', 'ls'), /portal dev has no container runtime: pods\/exec is not available/);
    assert.match(await fails('logs', 'missing'), /pods "missing" not found/);
  } finally {
    done();
  }
}));

test('controllers create Pods as their service accounts through admission; a denied Pod is FailedCreate, one Event counting the retries', { timeout: 60_000 }, async () => {
  const seen: AdmissionAttributes[] = [];
  const admission: AdmissionHook = {
    admit: (attrs) => {
      seen.push(attrs);
      const image = JSON.stringify(attrs.object ?? {});
      if (attrs.resource.resource === 'pods' && attrs.operation === 'CREATE' && image.includes('"image":"denied"')) {
        return Promise.resolve({ allowed: false, warnings: [], status: { code: 403, reason: 'Forbidden', message: 'admission webhook "portal.example" denied the request: image "denied" is not allowed' } });
      }
      return Promise.resolve({ allowed: true, warnings: [] });
    },
  };
  await withServer({ controllers: true, admission }, async (s) => {
    const { k, done } = kubectl(s.kubeConfig('admin'));
    try {
      await k('create', 'deployment', 'ok', '--image=nginx');
      await k('rollout', 'status', 'deployment/ok', '--timeout=30s');
      const podCreates = seen.filter((a) => a.resource.resource === 'pods' && a.operation === 'CREATE' && a.subResource === '');
      assert.ok(podCreates.length >= 1);
      assert.equal(podCreates[0]!.userInfo.username, 'system:serviceaccount:kube-system:replicaset-controller');
      assert.ok(podCreates[0]!.userInfo.groups.includes('system:serviceaccounts:kube-system'));
      assert.ok(seen.some((a) => a.resource.resource === 'replicasets' && a.operation === 'CREATE' && a.userInfo.username === 'system:serviceaccount:kube-system:deployment-controller'));

      await k('create', 'deployment', 'bad', '--image=denied');
      const call = caller(s, s.adminToken);
      let cond: Record<string, unknown> | undefined;
      for (let i = 0; i < 200 && !cond; i++) {
        const d = await call('GET', '/apis/apps/v1/namespaces/default/deployments/bad');
        const conds = ((d.body['status'] as Record<string, unknown> | undefined)?.['conditions'] ?? []) as Record<string, unknown>[];
        cond = conds.find((c) => c['type'] === 'ReplicaFailure');
        if (!cond) await new Promise((r) => setTimeout(r, 50));
      }
      assert.equal(cond?.['reason'], 'FailedCreate');
      assert.match(String(cond?.['message']), /admission webhook "portal.example" denied the request: image "denied" is not allowed/);
      const events = await k('get', 'events', '--field-selector', 'reason=FailedCreate', '-o', 'jsonpath={.items[*].message}');
      assert.match(events, /Error creating: admission webhook "portal.example" denied the request/);
      // The retries are aggregated into that one Event, its count growing (client-go's EventCorrelator), not one Event each.
      let failed: { count: number }[] = [];
      for (let i = 0; i < 400 && !failed.some((e) => e.count >= 2); i++) {
        failed = (JSON.parse(await k('get', 'events', '--field-selector', 'reason=FailedCreate', '-o', 'json')) as { items: { count: number }[] }).items;
        if (!failed.some((e) => e.count >= 2)) await new Promise((r) => setTimeout(r, 100));
      }
      assert.equal(failed.length, 1, JSON.stringify(failed));
      assert.ok(failed[0]!.count >= 2, JSON.stringify(failed));
      assert.equal(await k('get', 'pods', '-l', 'app=bad', '-o', 'name'), '');
    } finally {
      done();
    }
  });
});
