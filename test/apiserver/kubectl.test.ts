import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { kubectlPath } from '../support/tools.ts';
import { withServer } from './helpers.ts';

const run = promisify(execFile);

const CRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, required: [size], properties: {size: {type: integer}}}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
`;

test('kubectl 1.35 with default flags', { timeout: 60_000 }, () => withServer({}, async (s) => {
  const dir = mkdtempSync(join(tmpdir(), 'portal-kubectl-'));
  const children: ReturnType<typeof spawn>[] = [];
  try {
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(kubeconfig, s.kubeConfig('kubectl-user'));
    const k = async (...args: string[]): Promise<string> =>
      (await run(kubectlPath(), ['--kubeconfig', kubeconfig, ...args], { env: { PATH: process.env['PATH'] ?? '', HOME: dir } })).stdout;
    const cm = join(dir, 'cm.yaml');
    writeFileSync(cm, 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm1}\ndata: {k: v}\n');
    assert.match(await k('apply', '-f', cm), /configmap\/cm1 created/);
    assert.match(await k('apply', '-f', cm), /configmap\/cm1 unchanged/);
    writeFileSync(cm, 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm1}\ndata: {k: v2}\n');
    assert.match(await k('apply', '-f', cm), /configmap\/cm1 configured/);
    assert.match(await k('label', 'cm', 'cm1', 'x=y'), /labeled/);
    assert.match(await k('annotate', 'cm', 'cm1', 'note=hi'), /annotated/);
    await k('patch', 'cm', 'cm1', '--type', 'merge', '-p', '{"data":{"m":"1"}}');
    await k('patch', 'cm', 'cm1', '--type', 'json', '-p', '[{"op":"add","path":"/data/j","value":"2"}]');
    const got = JSON.parse(await k('get', 'cm', 'cm1', '-o', 'json')) as { data: Record<string, string>; metadata: { labels: Record<string, string> } };
    assert.deepEqual(got.data, { k: 'v2', m: '1', j: '2' });
    assert.equal(got.metadata.labels['x'], 'y');
    const pod = join(dir, 'pod.yaml');
    writeFileSync(pod, 'apiVersion: v1\nkind: Pod\nmetadata: {name: p1}\nspec:\n  containers:\n  - {name: a, image: one}\n  - {name: b, image: two}\n');
    assert.match(await k('create', '-f', pod), /pod\/p1 created/);
    await k('patch', 'pod', 'p1', '--type', 'strategic', '-p', '{"spec":{"containers":[{"name":"b","image":"three"}]}}');
    assert.equal(await k('get', 'pod', 'p1', '-o', 'jsonpath={.spec.containers[*].image}'), 'one three');
    assert.match(await k('get', 'pods'), /^NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\n\s*p1\s+0\/2\s+Pending\s+0\s+\d+s\n/);
    assert.match(await k('api-resources'), /leases\s+coordination\.k8s\.io\/v1\s+true\s+Lease/);
    const crd = join(dir, 'crd.yaml');
    writeFileSync(crd, CRD);
    await k('apply', '-f', crd);
    assert.match(await k('wait', '--for=condition=Established', 'crd/widgets.example.com', '--timeout=10s'), /condition met/);
    const w = join(dir, 'w.yaml');
    writeFileSync(w, 'apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1}\nspec: {size: 3}\n');
    assert.match(await k('apply', '-f', w), /widget.example.com\/w1 created/);
    assert.match(await k('get', 'wd'), /^NAME\s+SIZE\n\s*w1\s+3\n/);
    // get -w sees a change
    const watcher = spawn(kubectlPath(), ['--kubeconfig', kubeconfig, 'get', 'wd', '-w', '--output-watch-events'], { env: { PATH: process.env['PATH'] ?? '', HOME: dir } });
    children.push(watcher);
    let out = '';
    const sawModified = new Promise<void>((resolve) => {
      watcher.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        if (/MODIFIED\s+w1\s+5/.test(out)) resolve();
      });
    });
    const deadline = Date.now() + 10_000;
    while (!/w1/.test(out) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    await k('patch', 'wd', 'w1', '--type', 'merge', '-p', '{"spec":{"size":5}}');
    await sawModified;
    // wait --for=delete returns once the object is gone
    const waiting = k('wait', '--for=delete', 'wd/w1', '--timeout=10s');
    await k('delete', 'wd', 'w1');
    await waiting;
    assert.match(await k('delete', 'cm', 'cm1'), /configmap "cm1" deleted/);
    await assert.rejects(k('get', 'cm', 'cm1'), /NotFound/);
  } finally {
    for (const c of children) c.kill();
    rmSync(dir, { recursive: true, force: true });
  }
}));

/** Lines of `out` that are pod rows (not the header). */
const rowsOf = (out: string): string[][] => out.trim().split('\n').filter((l) => l && !l.startsWith('NAME')).map((l) => l.trim().split(/\s+/));

test('kubectl get pods: READY STATUS RESTARTS AGE as on a real cluster, and plain -w prints rows as events arrive', { timeout: 60_000 }, () => withServer({}, async (s) => {
  const dir = mkdtempSync(join(tmpdir(), 'portal-kubectl-pods-'));
  const env = { PATH: process.env['PATH'] ?? '', HOME: dir };
  let watcher: ReturnType<typeof spawn> | undefined;
  try {
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(kubeconfig, s.kubeConfig('kubectl-user'));
    const k = async (...args: string[]): Promise<string> => (await run(kubectlPath(), ['--kubeconfig', kubeconfig, ...args], { env })).stdout;
    const pod = join(dir, 'pod.yaml');
    writeFileSync(pod, 'apiVersion: v1\nkind: Pod\nmetadata: {name: web, finalizers: [example.com/hold]}\nspec:\n  containers:\n  - {name: a, image: one}\n  - {name: b, image: two}\n  - {name: c, image: three}\n');
    await k('create', '-f', pod);

    // Default flags: no --output-watch-events, no -o. kubectl lists, then prints one row per event.
    watcher = spawn(kubectlPath(), ['--kubeconfig', kubeconfig, 'get', 'pods', '-w'], { env });
    let out = '';
    let errOut = '';
    watcher.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    watcher.stderr?.on('data', (d: Buffer) => (errOut += d.toString()));
    const waitFor = async (what: string, ok: (rows: string[][]) => boolean): Promise<void> => {
      const deadline = Date.now() + 10_000;
      while (!ok(rowsOf(out))) {
        assert.ok(Date.now() < deadline, `kubectl get pods -w: no ${what} in ${JSON.stringify(out)} (stderr ${JSON.stringify(errOut)})`);
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    await waitFor('initial row', (rows) => rows.length === 1);
    assert.match(out, /^NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\n/);
    assert.deepEqual(rowsOf(out)[0]!.slice(0, 4), ['web', '0/3', 'Pending', '0']);

    // The kubelet's report: two of three containers ready, restarts summed over containers.
    const status = {
      status: {
        phase: 'Running',
        containerStatuses: [
          { name: 'a', ready: true, restartCount: 2, image: 'one', imageID: '', started: true, state: { running: {} } },
          { name: 'b', ready: true, restartCount: 0, image: 'two', imageID: '', started: true, state: { running: {} } },
          { name: 'c', ready: false, restartCount: 3, image: 'three', imageID: '', started: false, state: { waiting: { reason: 'CrashLoopBackOff' } } },
        ],
      },
    };
    await k('patch', 'pod', 'web', '--subresource=status', '--type', 'merge', '-p', JSON.stringify(status));
    await waitFor('row for the status change', (rows) => rows.some((r) => r[1] === '2/3'));
    // A waiting container's reason is the pod's STATUS, as kube-apiserver prints it.
    assert.deepEqual(rowsOf(out).at(-1)!.slice(0, 4), ['web', '2/3', 'CrashLoopBackOff', '5']);
    assert.match(await k('get', 'pods'), /^NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\n\s*web\s+2\/3\s+CrashLoopBackOff\s+5\s+\d+s\n$/);

    // A finalizer holds the deleted pod: kubectl shows Terminating.
    await k('delete', 'pod', 'web', '--wait=false');
    await waitFor('Terminating row', (rows) => rows.some((r) => r[2] === 'Terminating'));
    assert.match(await k('get', 'pods'), /\n\s*web\s+2\/3\s+Terminating\s+5\s+\d+s\n$/);
    await k('patch', 'pod', 'web', '--type', 'merge', '-p', '{"metadata":{"finalizers":null}}');
    await assert.rejects(k('get', 'pod', 'web'), /NotFound/);
    assert.ok(watcher.exitCode === null, `kubectl get -w still running: ${errOut}`);
  } finally {
    watcher?.kill();
    rmSync(dir, { recursive: true, force: true });
  }
}));
