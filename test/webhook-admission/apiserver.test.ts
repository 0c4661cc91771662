// The admission chain inside the real embedded API server: what an API
// client sees (status code, kube's messages, Warning headers), and that
// webhook configurations stay writable even when every webhook is broken.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startApiServer, type ApiServer } from '../../packages/devcluster/src/apiserver/index.ts';
import { createWebhookAdmission } from '../../packages/devcluster/src/webhook-admission.ts';
import { makePki, startWebhook, webhookConfiguration, type Pki, type TestWebhook } from './support.ts';

let pki: Pki;
let api: ApiServer;
let webhook: TestWebhook;
const admission = createWebhookAdmission();

before(async () => {
  pki = await makePki();
  api = await startApiServer({ port: 0, admission });
  webhook = await startWebhook(pki, (r) => {
    const req = r.review.request;
    const obj = req['object'] as { metadata?: { labels?: Record<string, string> } } | null;
    const labels = obj?.metadata?.labels ?? {};
    if (labels['verdict'] === 'deny') {
      return { response: { uid: req.uid, allowed: false, status: { code: 403, message: 'pods labelled verdict=deny are not allowed' }, warnings: ['first warning'], auditAnnotations: { why: 'denied' } } };
    }
    const audit = labels['verdict'] === 'exempt' ? { auditAnnotations: { 'portal.dev/exception': 'default/agent' } } : {};
    return { response: { uid: req.uid, allowed: true, warnings: labels['verdict'] === 'warn' ? ['mind the gap', 'second one'] : [], ...audit } };
  });
});
after(async () => {
  await api?.close();
  admission.close();
  await webhook?.close();
});

async function call(method: string, path: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown>; warnings: string[] }> {
  const res = await fetch(`${api.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${api.adminToken}`, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const warning = res.headers.get('warning');
  return { status: res.status, body: (await res.json()) as Record<string, unknown>, warnings: warning ? [warning] : [] };
}

const pod = (name: string, labels: Record<string, string>): Record<string, unknown> => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, labels },
  spec: { containers: [{ name: 'c', image: 'nginx' }] },
});
const VWC = '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations';

void test('denials, warnings and call failures as an API client sees them', async () => {
  const cfg = webhookConfiguration('portal-test', [
    {
      name: 'pods.portal.test',
      clientConfig: { url: webhook.url, caBundle: pki.caBundle },
      rules: [{ apiGroups: [''], apiVersions: ['v1'], resources: ['pods'], operations: ['CREATE', 'UPDATE', 'DELETE'] }],
      namespaceSelector: { matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['kube-system'] }] },
    },
  ]);
  assert.equal((await call('POST', VWC, cfg)).status, 201);

  const denied = await call('POST', '/api/v1/namespaces/default/pods', pod('bad', { verdict: 'deny' }));
  assert.equal(denied.status, 403);
  assert.equal(denied.body['kind'], 'Status');
  assert.equal(denied.body['message'], 'admission webhook "pods.portal.test" denied the request: pods labelled verdict=deny are not allowed');
  assert.match(denied.warnings.join(','), /299 - "first warning"/);

  const warned = await call('POST', '/api/v1/namespaces/default/pods', pod('warned', { verdict: 'warn' }));
  assert.equal(warned.status, 201);
  assert.match(warned.warnings.join(','), /299 - "mind the gap"/);
  assert.match(warned.warnings.join(','), /299 - "second one"/);

  // auditAnnotations reach the audit log with the webhook's name as prefix, as
  // kube-apiserver records them (allowed or denied); none when there are none.
  assert.equal((await call('POST', '/api/v1/namespaces/default/pods', pod('exempt', { verdict: 'exempt' }))).status, 201);
  const audit = await call('GET', '/_portal/audit');
  const entries = audit.body as unknown as { verb: string; resource: string; name: string; code: number; annotations?: Record<string, string> }[];
  const entry = (name: string) => entries.find((e) => e.resource === 'pods' && e.verb === 'create' && e.name === name);
  assert.deepEqual(entry('exempt')?.annotations, { 'pods.portal.test/portal.dev/exception': 'default/agent' });
  assert.deepEqual(entries.find((e) => e.resource === 'pods' && e.verb === 'create' && e.code === 403)?.annotations, { 'pods.portal.test/why': 'denied' });
  assert.equal(entry('warned')?.annotations, undefined);

  // An excluded namespace is not sent to the webhook.
  const before = webhook.received.length;
  assert.equal((await call('POST', '/api/v1/namespaces/kube-system/pods', pod('sys', { verdict: 'deny' }))).status, 201);
  assert.equal(webhook.received.length, before);

  // A DELETE is sent with the old object.
  assert.equal((await call('DELETE', '/api/v1/namespaces/default/pods/warned')).status, 200);
  const del = webhook.received.at(-1)!.review.request;
  assert.equal(del['operation'], 'DELETE');
  assert.equal(del['object'], null);
  assert.equal((del['oldObject'] as { metadata: { name: string } }).metadata.name, 'warned');

  // Point the webhook at a closed port: failurePolicy Fail rejects with 500...
  const broken = webhookConfiguration('portal-test', [{ name: 'pods.portal.test', clientConfig: { url: 'https://127.0.0.1:1/validate', caBundle: pki.caBundle } }]);
  const current = await call('GET', `${VWC}/portal-test`);
  const put = await call('PUT', `${VWC}/portal-test`, { ...broken, metadata: { ...(broken['metadata'] as object), resourceVersion: (current.body['metadata'] as { resourceVersion: string }).resourceVersion } });
  assert.equal(put.status, 200);
  const failed = await call('POST', '/api/v1/namespaces/default/pods', pod('any', {}));
  assert.equal(failed.status, 500);
  assert.match(String(failed.body['message']), /^Internal error occurred: failed calling webhook "pods.portal.test": failed to call webhook: Post "https:\/\/127\.0\.0\.1:1\/validate\?timeout=10s": /);

  // ...yet the broken configuration itself can still be deleted.
  assert.equal((await call('DELETE', `${VWC}/portal-test`)).status, 200);
  assert.equal((await call('POST', '/api/v1/namespaces/default/pods', pod('after', {}))).status, 201);
});
