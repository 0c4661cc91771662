/**
 * Issue 31 item 5: a rule's apply-time check runs on a thread of its own
 * (src/evaluation/rule-check.ts), with the real worker module under V8
 * resourceLimits. It gives the answers the main thread gave (the webhook's
 * own tests and these compare them), queues per namespace with a bound
 * (overload is a 429 naming the rule and saying to retry), and a check that
 * passes its deadline or exhausts its thread refuses that rule by name,
 * while the thread is replaced and the next check is answered.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { parse as parseYaml } from 'yaml';
import { RuleChecks } from '../../src/evaluation/rule-check.ts';
import { builtinSchemas, layered, type KindSchemaSource } from '../../src/policy/kind-schemas/catalogue.ts';
import { CrdSchemaStore } from '../../src/policy/kind-schemas/crd-schemas.ts';
import { portalKinds, type KindReview, type KindValidation } from '../../src/policy/portal-kinds.ts';
import { allowAll, makePki, makeServer, type TestPki } from '../admission/helpers.ts';

const logger = pino({ level: 'silent' });
const checks: RuleChecks[] = [];
after(() => Promise.all(checks.map((c) => c.close())));

function ruleChecks(schemas: KindSchemaSource, extra: Partial<ConstructorParameters<typeof RuleChecks>[0]> = {}): RuleChecks {
  const c = new RuleChecks({ webhookTimeoutMs: 30_000, ...extra }, { logger, schemas });
  checks.push(c);
  return c;
}

/** The 62 KB schema of test/hostile/rule-churn: 1,050 annotations, each a bounded string. */
function bigSchema(salt: string): Record<string, unknown> {
  const annotations: Record<string, unknown> = {};
  for (let i = 0; i < 1_050; i++) annotations[`example.com/${salt}-key-${i}`] = { type: 'string', maxLength: 63 + (i % 7) };
  return { properties: { metadata: { properties: { annotations: { properties: annotations } } } } };
}

function rule(name: string, spec: Record<string, unknown>, namespace = 'tenant-a'): Record<string, unknown> {
  return {
    apiVersion: 'portal.dev/v1alpha1',
    kind: 'PortalRule',
    metadata: { name, namespace },
    spec: { enforcement: 'Deny', match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }] }, ...spec },
  };
}

const big = (name: string, namespace = 'tenant-a'): Record<string, unknown> => rule(name, { validate: { message: 'annotations must be short', schema: bigSchema(name) } }, namespace);
const small = (name: string, namespace = 'tenant-a'): Record<string, unknown> => rule(name, { validate: { message: 'm', schema: { type: 'object' } } }, namespace);

function reviewText(object: Record<string, unknown>, operation = 'CREATE'): string {
  const meta = object['metadata'] as { name: string; namespace?: string };
  return JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: `uid-${meta.name}`,
      kind: { group: 'portal.dev', version: 'v1alpha1', kind: object['kind'] },
      resource: { group: 'portal.dev', version: 'v1alpha1', resource: `${String(object['kind']).toLowerCase()}s` },
      name: meta.name,
      namespace: meta.namespace ?? '',
      operation,
      userInfo: { username: 'alice' },
      object,
      oldObject: null,
    },
  });
}

function kindReview(object: Record<string, unknown>): KindReview {
  const meta = object['metadata'] as { name: string; namespace?: string };
  return { body: reviewText(object), kind: String(object['kind']), namespace: meta.namespace ?? '', name: meta.name };
}

const CRD_FILE = join(import.meta.dirname, '..', '..', 'charts', 'portal', 'crds', 'portal.dev_portalclusterrules.yaml');

describe('rule checks on a thread', () => {
  let pki: TestPki;
  before(async () => {
    pki = await makePki();
  });

  it('answer what the main thread answers: compile errors, type checks against built-in and custom kinds, Audit warnings', async () => {
    const store = new CrdSchemaStore();
    store.set('portalclusterrules.portal.dev', parseYaml(readFileSync(CRD_FILE, 'utf8')) as unknown);
    const schemas = layered(builtinSchemas(), store);
    const threaded = ruleChecks(schemas);
    const inProcess = portalKinds({}, schemas).PortalRule!;
    const deployments = [{ apiGroups: ['apps'], kinds: ['Deployment'] }];
    const crdKinds = [{ apiGroups: ['portal.dev'], kinds: ['PortalClusterRule'] }];
    const cel = (expression: string, enforcement = 'Deny', kinds: unknown = deployments): Record<string, unknown> => ({ enforcement, match: { kinds }, validate: { cel: { expressions: [{ expression }] } } });
    const cases: Record<string, unknown>[] = [
      small('good'),
      big('big'),
      rule('syntax', { validate: { cel: { expressions: [{ expression: "object.spec.x == 'a' &&" }] } } }),
      rule('regex', { validate: { schema: { properties: { metadata: { properties: { name: { pattern: '(x{1,1000}){1,1000}' } } } } } } }),
      rule('shape', { enforcment: 'Deny', match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }], namespaceSelector: { matchExpressions: [{ key: 'team', operator: 'Within' }] } }, validate: { schema: { type: 'object' } } }),
      rule('deny-typo', cel('object.spec.replcas <= 10')),
      rule('audit-typo', cel('object.spec.replcas <= 10', 'Audit')),
      rule('crd-typo', cel('object.spec.enforcment == "Deny"', 'Deny', crdKinds)),
      rule('crd-fine', cel('object.spec.enforcement == "Deny"', 'Deny', crdKinds)),
      rule('unknown-kind', cel('object.spec.nope == 1', 'Deny', [{ apiGroups: ['example.com'], kinds: ['Widget'] }])),
      rule('wildcard', cel('object.spec.nope == 1', 'Deny', [{ apiGroups: ['*'], kinds: ['Widget'] }])),
      { apiVersion: 'portal.dev/v1alpha1', kind: 'PortalRule', metadata: { name: 'no-spec', namespace: 'tenant-a' } },
    ];
    for (const object of cases) {
      const name = (object['metadata'] as { name: string }).name;
      assert.deepEqual(await threaded.check(object, kindReview(object)), await inProcess.validate(object), name);
    }
    assert.equal((await threaded.check(cases[7]!, kindReview(cases[7]!))).ok, false, 'the custom kind was checked on the thread');
    assert.deepEqual(threaded.stats()['abandoned'], 0);
  });

  it('through the webhook: a refusal with line and column, an Audit rule admitted with its warning', async () => {
    const server = makeServer(pki, allowAll(), { portalKinds: portalKinds({}, builtinSchemas(), ruleChecks(builtinSchemas()).check) });
    try {
      const post = async (object: Record<string, unknown>) => {
        const res = await server.app.inject({ method: 'POST', url: '/validate-portal-kinds', headers: { 'content-type': 'application/json' }, payload: reviewText(object) });
        return (res.json() as { response: { allowed: boolean; warnings?: string[]; status?: { code: number; message: string } } }).response;
      };
      const broken = await post(rule('broken', { validate: { cel: { expressions: [{ expression: "object.spec.x == 'a' &&" }] } } }));
      assert.equal(broken.allowed, false);
      assert.equal(broken.status?.code, 422);
      assert.match(broken.status?.message ?? '', /^PortalRule "broken" is invalid: spec\.validate\.cel\.expressions\[0\]\.expression: compilation failed: line 1, column \d+: /);
      const audit = await post(rule('audit', { enforcement: 'Audit', match: { kinds: [{ apiGroups: ['apps'], kinds: ['Deployment'] }] }, validate: { cel: { expressions: [{ expression: 'object.spec.replcas <= 10' }] } } }));
      assert.equal(audit.allowed, true);
      assert.deepEqual(audit.warnings, ['expressions[0].expression: spec.replcas: no such field in apps/v1 Deployment']);
      assert.equal((await post(big('fine'))).allowed, true);
    } finally {
      await server.app.close();
    }
  });

  it('a check past its deadline refuses that rule by name and reason; the thread is replaced and the next check answered', async () => {
    const c = ruleChecks(builtinSchemas(), { timeoutMs: 20 });
    const server = makeServer(pki, allowAll(), { portalKinds: portalKinds({}, builtinSchemas(), c.check) });
    try {
      const res = await server.app.inject({ method: 'POST', url: '/validate-portal-kinds', headers: { 'content-type': 'application/json' }, payload: reviewText(big('slow')) });
      const response = (res.json() as { response: { allowed: boolean; status?: { code: number; message: string } } }).response;
      assert.equal(response.allowed, false);
      assert.equal(response.status?.code, 422);
      assert.match(response.status?.message ?? '', /^PortalRule "slow" is invalid: spec\.validate: checking this rule took longer than its deadline \(20 ms\); the check was stopped and the rule is refused/);
      assert.equal(c.stats()['abandoned'], 1);
      // The replacement's first checks run cold (JIT) and may pass 20 ms on a loaded machine too: each is answered, one is accepted.
      let next: KindValidation = { ok: false, problems: [] };
      for (let i = 0; i < 10 && !next.ok; i++) {
        next = await c.check(small(`next-${i}`), kindReview(small(`next-${i}`)));
        if (!next.ok) assert.match(next.problems[0] ?? '', /took longer than its deadline \(20 ms\)/);
      }
      assert.deepEqual(next, { ok: true });
    } finally {
      await server.app.close();
    }
  });

  it('a check that exhausts its thread refuses that rule by name and reason; the thread is replaced and the next check answered', async () => {
    const c = ruleChecks(builtinSchemas(), { memory: { maxOldGenerationSizeMb: 32, maxYoungGenerationSizeMb: 16, stackSizeMb: 4 } });
    // 1M empty match entries: ~3 MB of text the main thread reads in passing, far more than 32 MiB once parsed on the thread.
    const hog = rule('hog', { match: { kinds: Array.from({ length: 1_000_000 }, () => ({})) }, validate: { schema: { type: 'object' } } });
    const answer = await c.check(hog, kindReview(hog));
    assert.equal(answer.ok, false);
    assert.match((answer as { problems: string[] }).problems[0] ?? '', /^spec\.validate: checking this rule exhausted the memory of the thread that checks rules \(32 MiB heap\); the check was stopped and the rule is refused: make its schema or CEL smaller$/);
    assert.equal(c.stats()['outOfMemory'], 1);
    assert.deepEqual(await c.check(small('next'), kindReview(small('next'))), { ok: true });
  });

  it('a namespace past its share of the queue gets 429 naming the rule and saying to retry; another namespace is answered', async () => {
    const server = makeServer(pki, allowAll(), { portalKinds: portalKinds({}, builtinSchemas(), ruleChecks(builtinSchemas(), { flowQueue: 1 }).check) });
    try {
      const post = async (object: Record<string, unknown>) => {
        const res = await server.app.inject({ method: 'POST', url: '/validate-portal-kinds', headers: { 'content-type': 'application/json' }, payload: reviewText(object) });
        assert.equal(res.statusCode, 200);
        return (res.json() as { response: { allowed: boolean; status?: { code: number; reason: string; message: string } } }).response;
      };
      const answers = await Promise.all([post(big('many-0')), post(big('many-1')), post(big('many-2')), post(small('other', 'tenant-b'))]);
      assert.equal(answers[3]?.allowed, true, 'tenant-b has its own share');
      const refused = answers.slice(0, 3).filter((a) => !a.allowed);
      assert.ok(refused.length >= 1, 'tenant-a is past its share of one');
      for (const a of refused) {
        assert.equal(a.status?.code, 429);
        assert.equal(a.status?.reason, 'TooManyRequests');
        assert.match(a.status?.message ?? '', /^PortalRule "many-\d" was not checked: portal is overloaded: Portal's own kinds in namespace tenant-a .*Retry the apply\.$/);
      }
      assert.ok(answers.slice(0, 3).some((a) => a.allowed), 'the first of tenant-a is checked');
    } finally {
      await server.app.close();
    }
  });
});
