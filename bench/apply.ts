/**
 * Server-side apply against a plain merge patch, per object, through the
 * embedded API server over HTTPS (issue 11 item 4). The same Deployment body
 * changes one field per request; both paths pay parsing, defaulting,
 * validation, managedFields bookkeeping for an Update entry (merge patch) and
 * field sets, conflict check and merge for an Apply entry (apply). Sequential
 * requests, one client, so the figure is per-object server cost plus one
 * round trip; the ratio is apply / merge patch, measured in the same run,
 * interleaved in rounds so load drift hits both alike.
 *
 * A second, in-process part isolates the CPU the field manager adds per
 * write (recordUpdate for every non-apply write, recordApply for an apply)
 * against what every write pays anyway: JSON.parse + JSON.stringify of the
 * object and the merge patch itself.
 *
 * Run: node --import tsx bench/apply.ts [--n 2000] [--rounds 4]
 */
import { parseArgs } from 'node:util';
import { Agent, request } from 'node:https';
import { recordApply, recordUpdate } from '../packages/devcluster/src/apiserver/apply/managed.ts';
import { startApiServer } from '../packages/devcluster/src/apiserver/index.ts';
import { typeModel } from '../packages/devcluster/src/apiserver/openapi/model.ts';
import { mergePatch } from '../packages/devcluster/src/apiserver/patch.ts';
import { Registry } from '../packages/devcluster/src/apiserver/registry.ts';

const { values } = parseArgs({ options: { n: { type: 'string', default: '2000' }, rounds: { type: 'string', default: '4' } } });
const N = Number(values.n);
const ROUNDS = Number(values.rounds);

const api = await startApiServer({ plainHttp: false });
const url = new URL(api.url);
const agent = new Agent({ keepAlive: true, maxSockets: 1, ca: api.caCert });

function call(method: string, path: string, body: string, contentType: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, path, method, agent, headers: {
      Authorization: `Bearer ${api.adminToken}`, 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(body), 'User-Agent': 'bench/1',
    } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const deployment = (name: string, replicas: number, image: string): string => JSON.stringify({
  apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name, labels: { app: name } },
  spec: { replicas, selector: { matchLabels: { app: name } }, template: { metadata: { labels: { app: name } }, spec: {
    containers: [{ name: 'app', image, ports: [{ containerPort: 8080 }], env: [{ name: 'A', value: '1' }], resources: { limits: { cpu: '500m' } } }] } } },
});

const base = '/apis/apps/v1/namespaces/default/deployments';
if (await call('POST', base, deployment('patched', 1, 'img:0'), 'application/json') !== 201) throw new Error('create failed');
if (await call('PATCH', `${base}/applied?fieldManager=bench`, deployment('applied', 1, 'img:0'), 'application/apply-patch+yaml') !== 201) throw new Error('apply-create failed');

async function timed(fn: (i: number) => Promise<number>): Promise<number> {
  const start = performance.now();
  for (let i = 1; i <= N; i++) {
    const code = await fn(i);
    if (code !== 200) throw new Error(`status ${code}`);
  }
  return ((performance.now() - start) * 1000) / N;
}

const patchUs: number[] = [];
const applyUs: number[] = [];
let v = 0;
for (let r = 0; r < ROUNDS; r++) {
  patchUs.push(await timed(() => call('PATCH', `${base}/patched?fieldManager=bench`, deployment('patched', 1, `img:${++v}`), 'application/merge-patch+json')));
  applyUs.push(await timed(() => call('PATCH', `${base}/applied?fieldManager=bench`, deployment('applied', 1, `img:${++v}`), 'application/apply-patch+yaml')));
}
await api.close();
agent.destroy();
// ---- in-process: field-manager CPU per write, against parse+stringify of the same object
const model = typeModel(new Registry().get('apps', 'v1', 'deployments')!)!;
const typing = { nav: model, root: model.root };
const writer = { manager: 'bench', apiVersion: 'apps/v1', subresource: '', hasStatus: true, now: '2026-01-01T00:00:00Z' };
const live = JSON.parse(deployment('x', 1, 'img:0')) as Record<string, unknown>;
(live['metadata'] as Record<string, unknown>)['managedFields'] = recordUpdate(typing, undefined, live, writer);
const nextText = deployment('x', 1, 'img:1');
function perCallUs(fn: () => unknown): number {
  for (let i = 0; i < 500; i++) fn();
  const n = 20_000;
  const start = performance.now();
  for (let i = 0; i < n; i++) fn();
  return ((performance.now() - start) * 1000) / n;
}
// Each call decodes a fresh body, as a write does (the replaced object's members are cached, as in the server).
const parse = perCallUs(() => JSON.parse(nextText));
const parseStringify = perCallUs(() => JSON.stringify(JSON.parse(nextText)));
const merge = perCallUs(() => mergePatch(live, JSON.parse(nextText))) - parse;
const update = perCallUs(() => recordUpdate(typing, live, JSON.parse(nextText) as Record<string, unknown>, writer)) - parse;
const apply = perCallUs(() => recordApply(typing, live, JSON.parse(nextText) as Record<string, unknown>, { ...writer, manager: 'bench' }, true)) - parse;

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const p = median(patchUs);
const a = median(applyUs);
console.log(JSON.stringify({
  benchmark: 'apply', node: process.version, requestsPerRound: N, rounds: ROUNDS,
  usPerObject: { mergePatch: +p.toFixed(1), serverSideApply: +a.toFixed(1) }, ratio: +(a / p).toFixed(2),
  inProcessUs: { parseStringify: +parseStringify.toFixed(2), mergePatch: +merge.toFixed(2), recordUpdate: +update.toFixed(2), recordApply: +apply.toFixed(2),
    recordUpdateVsParseStringify: +(update / parseStringify).toFixed(2), recordApplyVsParseStringify: +(apply / parseStringify).toFixed(2) },
  rounds_us: { mergePatch: patchUs.map((x) => +x.toFixed(1)), serverSideApply: applyUs.map((x) => +x.toFixed(1)) },
}, null, 2));
