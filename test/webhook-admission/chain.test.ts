// The admission chain against real HTTPS webhooks: what is sent, how answers
// and failures become outcomes (kube-apiserver's wording), failurePolicy.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import net from 'node:net';
import type { AdmissionAttributes, AdmissionContext } from '../../packages/devcluster/src/apiserver/admission-hook.ts';
import { createWebhookAdmission } from '../../packages/devcluster/src/webhook-admission.ts';
import { allow, makePki, startWebhook, webhookConfiguration, type Pki, type TestWebhook } from './support.ts';

let pki: Pki;
let otherPki: Pki;
let svcPki: Pki;
const servers: TestWebhook[] = [];
const admission = createWebhookAdmission();

before(async () => {
  [pki, otherPki, svcPki] = await Promise.all([makePki(), makePki(), makePki(['portal-webhook.portal-system.svc'], [])]);
});
after(async () => {
  admission.close();
  await Promise.all(servers.map((s) => s.close()));
});

async function webhook(...args: Parameters<typeof startWebhook>): Promise<TestWebhook> {
  const s = await startWebhook(...args);
  servers.push(s);
  return s;
}

function attrs(over: Partial<AdmissionAttributes> = {}): AdmissionAttributes {
  return {
    operation: 'CREATE',
    kind: { group: '', version: 'v1', kind: 'Pod' },
    resource: { group: '', version: 'v1', resource: 'pods' },
    subResource: '',
    namespace: 'default',
    name: 'web',
    namespaced: true,
    object: { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'web', namespace: 'default' } },
    oldObject: null,
    userInfo: { username: 'alice', uid: 'u-1', groups: ['system:authenticated'] },
    dryRun: false,
    options: { kind: 'CreateOptions', apiVersion: 'meta.k8s.io/v1' },
    ...over,
  };
}

function ctx(configs: Record<string, unknown>[]): AdmissionContext {
  return {
    namespaceLabels: (name) => ({ 'kubernetes.io/metadata.name': name }),
    validatingWebhookConfigurations: () => configs,
    signal: new AbortController().signal,
  };
}

void test('sends an AdmissionReview v1 as kube-apiserver does and allows on allowed: true', async () => {
  const w = await webhook(pki);
  const out = await admission.admit(attrs(), ctx([webhookConfiguration('c', [{ name: 'a.test', clientConfig: { url: w.url, caBundle: pki.caBundle } }])]));
  assert.deepEqual(out, { allowed: true, warnings: [] });
  assert.equal(w.received.length, 1);
  const r = w.received[0]!;
  assert.equal(r.url, '/validate?timeout=10s');
  assert.equal(r.headers['content-type'], 'application/json');
  assert.equal(r.review['apiVersion'], 'admission.k8s.io/v1');
  assert.equal(r.review['kind'], 'AdmissionReview');
  const req = r.review.request;
  assert.match(req.uid, /^[0-9a-f-]{36}$/);
  assert.deepEqual(req['kind'], { group: '', version: 'v1', kind: 'Pod' });
  assert.deepEqual(req['resource'], { group: '', version: 'v1', resource: 'pods' });
  assert.deepEqual(req['requestKind'], req['kind']);
  assert.deepEqual(req['requestResource'], req['resource']);
  assert.equal(req['operation'], 'CREATE');
  assert.equal(req['namespace'], 'default');
  assert.equal(req['name'], 'web');
  assert.deepEqual(req['userInfo'], { username: 'alice', uid: 'u-1', groups: ['system:authenticated'] });
  assert.ok('oldObject' in req && req['oldObject'] === null);
  assert.equal(req['dryRun'], false);
  assert.deepEqual(req['options'], { kind: 'CreateOptions', apiVersion: 'meta.k8s.io/v1' });
  assert.equal((req['object'] as { metadata: { name: string } }).metadata.name, 'web');
});

void test('a denial carries the webhook name, message and code (raised to 400), plus warnings', async () => {
  const w = await webhook(pki, (r) => ({
    response: { uid: r.review.request.uid, allowed: false, status: { code: 403, reason: 'Forbidden', message: 'no privileged pods' }, warnings: ['w1'] },
  }));
  const low = await webhook(pki, (r) => ({ response: { uid: r.review.request.uid, allowed: false, status: { code: 200 } } }));
  const out = await admission.admit(attrs(), ctx([webhookConfiguration('c', [{ name: 'deny.test', clientConfig: { url: w.url, caBundle: pki.caBundle } }])]));
  assert.deepEqual(out, {
    allowed: false,
    warnings: ['w1'],
    status: { code: 403, reason: 'Forbidden', message: 'admission webhook "deny.test" denied the request: no privileged pods' },
  });
  const out2 = await admission.admit(attrs(), ctx([webhookConfiguration('c', [{ name: 'low.test', clientConfig: { url: low.url, caBundle: pki.caBundle } }])]));
  assert.deepEqual(out2, {
    allowed: false,
    warnings: [],
    status: { code: 400, reason: '', message: 'admission webhook "low.test" denied the request without explanation' },
  });
});

void test('all matching webhooks are called; warnings are collected; the first denial in configuration order wins', async () => {
  const warnA = await webhook(pki, (r) => ({ response: { uid: r.review.request.uid, allowed: true, warnings: ['from a'] } }));
  const denyB = await webhook(pki, (r) => ({ response: { uid: r.review.request.uid, allowed: false, status: { code: 403, message: 'b says no' } } }));
  const denyC = await webhook(pki, (r) => ({ response: { uid: r.review.request.uid, allowed: false, status: { code: 422, message: 'c says no' }, warnings: ['from c'] } }));
  const notMatching = await webhook(pki);
  const configs = [
    webhookConfiguration('zz', [{ name: 'c.test', clientConfig: { url: denyC.url, caBundle: pki.caBundle } }]),
    webhookConfiguration('aa', [
      { name: 'a.test', clientConfig: { url: warnA.url, caBundle: pki.caBundle } },
      { name: 'b.test', clientConfig: { url: denyB.url, caBundle: pki.caBundle } },
      { name: 'n.test', clientConfig: { url: notMatching.url, caBundle: pki.caBundle }, rules: [{ apiGroups: ['apps'], apiVersions: ['*'], resources: ['*'], operations: ['*'] }] },
    ]),
  ];
  const out = await admission.admit(attrs(), ctx(configs));
  assert.equal(out.allowed, false);
  assert.deepEqual(out.warnings, ['from a', 'from c']);
  assert.equal(!out.allowed && out.status.message, 'admission webhook "b.test" denied the request: b says no');
  assert.equal(notMatching.received.length, 0);
  assert.equal(warnA.received.length + denyB.received.length + denyC.received.length, 3);
});

void test('webhook configurations themselves are never sent to webhooks', async () => {
  const w = await webhook(pki, (r) => ({ response: { uid: r.review.request.uid, allowed: false } }));
  const everything = webhookConfiguration('c', [
    { name: 'all.test', clientConfig: { url: w.url, caBundle: pki.caBundle }, rules: [{ apiGroups: ['*'], apiVersions: ['*'], resources: ['*/*'], operations: ['*'] }] },
  ]);
  for (const resource of ['validatingwebhookconfigurations', 'mutatingwebhookconfigurations']) {
    const a = attrs({
      kind: { group: 'admissionregistration.k8s.io', version: 'v1', kind: 'X' },
      resource: { group: 'admissionregistration.k8s.io', version: 'v1', resource },
      namespace: '',
      namespaced: false,
      operation: 'DELETE',
    });
    assert.deepEqual(await admission.admit(a, ctx([everything])), { allowed: true, warnings: [] });
  }
  assert.equal(w.received.length, 0);
});

void test('v1beta1 is used when it is the first supported version; its uid is not checked (as upstream)', async () => {
  const w = await webhook(pki, () => ({ response: { uid: 'whatever', allowed: true } }));
  const out = await admission.admit(
    attrs(),
    ctx([webhookConfiguration('c', [{ name: 'b.test', admissionReviewVersions: ['v2', 'v1beta1', 'v1'], clientConfig: { url: w.url, caBundle: pki.caBundle } }])]),
  );
  assert.deepEqual(out, { allowed: true, warnings: [] });
  assert.equal(w.received[0]?.review['apiVersion'], 'admission.k8s.io/v1beta1');
});

void test('service references are called on <svc>.<ns>.svc (certificate checked for that name) through resolveService', async () => {
  const w = await webhook(svcPki);
  const seen: string[] = [];
  const viaService = createWebhookAdmission({
    resolveService: (ns, name, port) => {
      seen.push(`${ns}/${name}:${port}`);
      return `127.0.0.1:${w.port}`;
    },
  });
  try {
    const cfg = webhookConfiguration('c', [
      { name: 's.test', timeoutSeconds: 5, clientConfig: { caBundle: svcPki.caBundle, service: { namespace: 'portal-system', name: 'portal-webhook', port: 8443, path: '/validate' } } },
    ]);
    assert.deepEqual(await viaService.admit(attrs(), ctx([cfg])), { allowed: true, warnings: [] });
    assert.deepEqual(seen, ['portal-system/portal-webhook:8443']);
    assert.equal(w.received[0]?.headers['host'], 'portal-webhook.portal-system.svc:8443');
    assert.equal(w.received[0]?.url, '/validate?timeout=5s');
  } finally {
    viaService.close();
  }
});

void test('webhook connections are kept alive and reused, by URL and by service reference, as kube-apiserver does; the certificate is still checked for the service name', async () => {
  // Each call once made a new TLS connection: on a loaded machine the handshakes alone outlasted the webhook timeout.
  const byUrl = await webhook(pki);
  const bySvc = await webhook(svcPki);
  const wrongName = await webhook(pki); // serves localhost and 127.0.0.1, not portal-webhook.portal-system.svc
  const chain = createWebhookAdmission({ resolveService: (_ns, name) => `127.0.0.1:${name === 'wrong' ? wrongName.port : bySvc.port}` });
  const svc = (name: string, caBundle: string): Record<string, unknown> => ({ name: `${name}.test`, clientConfig: { caBundle, service: { namespace: 'portal-system', name, port: 8443, path: '/validate' } } });
  try {
    const cfg = webhookConfiguration('c', [{ name: 'u.test', clientConfig: { url: byUrl.url, caBundle: pki.caBundle } }, svc('portal-webhook', svcPki.caBundle)]);
    for (let i = 0; i < 5; i++) assert.deepEqual(await chain.admit(attrs({ name: `web-${i}` }), ctx([cfg])), { allowed: true, warnings: [] });
    assert.equal(byUrl.received.length, 5);
    assert.equal(bySvc.received.length, 5);
    assert.equal(byUrl.connections(), 1, 'five calls by URL, one connection');
    assert.equal(bySvc.connections(), 1, 'five calls by service, one connection');
    const out = await chain.admit(attrs(), ctx([webhookConfiguration('w', [svc('wrong', pki.caBundle)])]));
    assert.equal(out.allowed, false);
    assert.match(!out.allowed ? out.status.message : '', /failed calling webhook "wrong.test": failed to call webhook: .*Host: wrong\.portal-system\.svc\. is not in the cert's altnames/);
    assert.equal(wrongName.received.length, 0);
  } finally {
    chain.close();
  }
});

/** A port nothing listens on: bind one, then close it. */
async function closedPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as net.AddressInfo;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

void test('call failures: Fail rejects with 500 "failed calling webhook", Ignore allows', async (t) => {
  const good = await webhook(pki);
  const wrongUid = await webhook(pki, () => allow('not-the-uid'));
  const wrongKind = await webhook(pki, (r) => ({ response: { uid: r.review.request.uid, allowed: true }, kind: 'Pod' }));
  const status500 = await webhook(pki, () => ({ raw: { status: 500, body: '' } }));
  const notJson = await webhook(pki, () => ({ raw: { status: 200, body: '<html>' } }));
  const hang = await webhook(pki, () => ({ hang: true }));
  const refused = `https://127.0.0.1:${await closedPort()}/validate`;
  const cases: { name: string; clientConfig: Record<string, unknown>; timeoutSeconds?: number; reason: RegExp }[] = [
    { name: 'timeout', clientConfig: { url: hang.url, caBundle: pki.caBundle }, timeoutSeconds: 1, reason: /Post "https:\/\/127\.0\.0\.1:\d+\/validate\?timeout=1s": context deadline exceeded$/ },
    { name: 'refused', clientConfig: { url: refused, caBundle: pki.caBundle }, reason: /ECONNREFUSED/ },
    { name: 'bad-cert', clientConfig: { url: good.url, caBundle: otherPki.caBundle }, reason: /certificate/ },
    { name: 'no-ca', clientConfig: { url: good.url }, reason: /certificate/ },
    { name: 'wrong-uid', clientConfig: { url: wrongUid.url, caBundle: pki.caBundle }, reason: /received invalid webhook response: expected response.uid="[0-9a-f-]+", got "not-the-uid"/ },
    { name: 'wrong-kind', clientConfig: { url: wrongKind.url, caBundle: pki.caBundle }, reason: /expected webhook response of admission.k8s.io\/v1, Kind=AdmissionReview, got admission.k8s.io\/v1, Kind=Pod/ },
    { name: 'http-500', clientConfig: { url: status500.url, caBundle: pki.caBundle }, reason: /status code 500/ },
    { name: 'not-json', clientConfig: { url: notJson.url, caBundle: pki.caBundle }, reason: /couldn't decode/ },
  ];
  await Promise.all(
    cases.map(async (c) => {
      const hook = { name: `${c.name}.test`, clientConfig: c.clientConfig, ...(c.timeoutSeconds ? { timeoutSeconds: c.timeoutSeconds } : {}) };
      const [fail, ignore] = await Promise.all([
        admission.admit(attrs(), ctx([webhookConfiguration('c', [{ ...hook, failurePolicy: 'Fail' }])])),
        admission.admit(attrs(), ctx([webhookConfiguration('c', [{ ...hook, failurePolicy: 'Ignore' }])])),
      ]);
      t.diagnostic(`${c.name}: ${fail.allowed ? 'allowed' : fail.status.message}`);
      assert.equal(fail.allowed, false, c.name);
      if (!fail.allowed) {
        assert.equal(fail.status.code, 500);
        assert.equal(fail.status.reason, 'InternalError');
        assert.ok(fail.status.message.startsWith(`Internal error occurred: failed calling webhook "${c.name}.test": failed to call webhook: `) || fail.status.message.includes('received invalid webhook response'), fail.status.message);
        assert.match(fail.status.message, c.reason);
      }
      assert.deepEqual(ignore, { allowed: true, warnings: [] }, c.name);
    }),
  );
});

void test('a missing namespace with a namespaceSelector is a 404, as upstream', async () => {
  const w = await webhook(pki);
  const cfg = webhookConfiguration('c', [{ name: 'ns.test', clientConfig: { url: w.url, caBundle: pki.caBundle }, namespaceSelector: { matchLabels: { x: 'y' } } }]);
  const out = await admission.admit(attrs({ namespace: 'gone' }), { ...ctx([cfg]), namespaceLabels: () => undefined });
  assert.deepEqual(out, { allowed: false, warnings: [], status: { code: 404, reason: 'NotFound', message: 'namespaces "gone" not found' } });
  assert.equal(w.received.length, 0);
});
