/**
 * `POST /validate-portal-kinds` (issue 15 item 2): Portal's own kinds are
 * refused when they would not compile, in kube-apiserver's words for an
 * invalid ValidatingAdmissionPolicy, whatever the readiness of the replica;
 * everything else it could be sent is allowed. The messages are the
 * RuleSet's own (one implementation: validateRule).
 */
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { validateRule } from '../../src/policy/index.ts';
import { allowAll, makePki, makeServer, type TestPki } from './helpers.ts';

function review(object: Record<string, unknown> | null, opts: { operation?: string; kind?: string; group?: string; subResource?: string } = {}): Record<string, unknown> {
  const kind = opts.kind ?? 'PortalClusterRule';
  const meta = (object?.['metadata'] ?? {}) as { name?: string; namespace?: string };
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: 'uid-rule',
      kind: { group: opts.group ?? 'portal.dev', version: 'v1alpha1', kind },
      resource: { group: 'portal.dev', version: 'v1alpha1', resource: `${kind.toLowerCase()}s` },
      ...(opts.subResource ? { subResource: opts.subResource } : {}),
      name: meta.name ?? '',
      namespace: meta.namespace ?? '',
      operation: opts.operation ?? 'CREATE',
      userInfo: { username: 'alice' },
      object,
      oldObject: null,
    },
  };
}

const rule = (spec: Record<string, unknown>, name = 'broken'): Record<string, unknown> => ({
  apiVersion: 'portal.dev/v1alpha1',
  kind: 'PortalClusterRule',
  metadata: { name },
  spec: { enforcement: 'Warn', match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }] }, ...spec },
});

describe('the webhook for Portal\'s own kinds', () => {
  let pki: TestPki;
  before(async () => {
    pki = await makePki();
  });

  async function post(body: unknown, ready = true): Promise<{ status: number; response: { uid: string; allowed: boolean; status?: { code: number; reason: string; message: string } } }> {
    const server = makeServer(pki, allowAll());
    // Readiness does not matter here: the answer depends on the object alone.
    if (ready) server.gate.addCheck('rules', () => true);
    else server.gate.addCheck('rules', () => 'waiting for the informers');
    const res = await server.app.inject({ method: 'POST', url: '/validate-portal-kinds?timeout=5s', headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) });
    await server.app.close();
    return { status: res.statusCode, response: (res.json() as { response: never }).response };
  }

  it('refuses a CEL syntax error with its field, line and column, as the API server words a VAP', async () => {
    const { status, response } = await post(review(rule({ validate: { cel: { expressions: [{ expression: "object.spec.x == 'a' &&" }] } } })), false);
    assert.equal(status, 200);
    assert.equal(response.uid, 'uid-rule');
    assert.equal(response.allowed, false);
    assert.equal(response.status?.code, 422);
    assert.equal(response.status?.reason, 'Invalid');
    assert.match(response.status?.message ?? '', /^PortalClusterRule "broken" is invalid: spec\.validate\.cel\.expressions\[0\]\.expression: compilation failed: line 1, column \d+: /);
  });

  it('refuses a schema that does not compile, a regex over the limits, an invalid match block and an unknown field, all at once', async () => {
    const bad = rule({
      match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }], namespaceSelector: { matchExpressions: [{ key: 'team', operator: 'Within' }] } },
      enforcment: 'Deny',
      validate: { schema: { properties: { metadata: { properties: { name: { pattern: 'a{1000}{1000}' } } } } } },
    });
    const { response } = await post(review(bad));
    assert.equal(response.allowed, false);
    const message = response.status?.message ?? '';
    assert.match(message, /^PortalClusterRule "broken" is invalid: \[/);
    assert.match(message, /spec\.enforcment: unknown field/);
    assert.match(message, /spec\.match\.namespaceSelector\.matchExpressions\[0\]\.operator/);
    // The same problems as validateRule gives (portal test, the RuleSet): one implementation.
    const v = validateRule(bad);
    assert.equal(v.ok, false);
    for (const p of (v as { problems: string[] }).problems) assert.ok(message.includes(p), `${p} in ${message}`);

    const regex = await post(review(rule({ validate: { schema: { properties: { metadata: { properties: { name: { pattern: '(x{1,1000}){1,1000}' } } } } } } })));
    assert.equal(regex.response.allowed, false);
    assert.match(regex.response.status?.message ?? '', /spec\.validate\.schema: compilation failed: regular expression \/\(x\{1,1000\}\)\{1,1000\}\/ is not valid: expression too large/);
  });

  it('admits a rule that compiles, on CREATE and UPDATE, and a PortalRule in its namespace', async () => {
    const good = rule({ validate: { cel: { expressions: [{ expression: 'has(object.metadata.labels)' }] } } }, 'good');
    assert.equal((await post(review(good))).response.allowed, true);
    assert.equal((await post(review(good, { operation: 'UPDATE' }))).response.allowed, true);
    const namespaced = { ...good, kind: 'PortalRule', metadata: { name: 'good', namespace: 'shop' } };
    assert.equal((await post(review(namespaced, { kind: 'PortalRule' }))).response.allowed, true);
  });

  it('allows what it does not check: DELETE, other kinds and groups, subresources', async () => {
    const broken = rule({ validate: { cel: { expressions: [{ expression: '(' }] } } });
    assert.equal((await post(review(null, { operation: 'DELETE' }))).response.allowed, true);
    assert.equal((await post(review(broken, { kind: 'Widget' }))).response.allowed, true);
    assert.equal((await post(review(broken, { group: 'example.com' }))).response.allowed, true);
    assert.equal((await post(review(broken, { subResource: 'status' }))).response.allowed, true);
  });

  it('answers a malformed review with 400, echoing the uid when it has one', async () => {
    const { status, response } = await post({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: { uid: 'u-2', kind: { kind: 'PortalRule' }, operation: 'CREATE', object: null } });
    assert.equal(status, 400);
    assert.equal(response.uid, 'u-2');
    assert.equal(response.allowed, false);
  });
});
