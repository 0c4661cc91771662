/**
 * Issue 16, "CEL functions that cost nothing": each reproduction of the
 * issue as a tenant's PortalRule and as a ValidatingAdmissionPolicy. Each
 * now ends with an `error` verdict that names the cost limit (or, for a
 * constant regex over the program-size limit, with a refusal at compile
 * and apply time), and another namespace's request is still decided.
 * Assertions are on verdicts and messages, never on time; the work is
 * refused before it starts because each function charges by the size of its
 * inputs (src/policy/cel/cost.ts). The last case runs against a real
 * `portal serve` process.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decideAdmission, evaluate, MAX_PROGRAM_SIZE, RuleSet, validateRule, type KubeObject } from '../../src/policy/index.ts';
import { input, namespacedRule, pod } from '../policy/support.ts';
import { admissionOutcome, VapSet, verdictOf, type VapAttributes } from '../policy/vap/support.ts';
import { podReview, review, startServe } from '../replica/support.ts';

const PER_CALL = /per-expression cost limit \(1000000 units\)/;

const list30k = Array.from({ length: 30_000 }, (_, i) => `entry-${i}`).join(',');
const map16k = (): Record<string, number[]> => ({ a: Array.from({ length: 16_000 }, (_, i) => i), b: Array.from({ length: 16_000 }, (_, i) => i) });
const REGEX_5000 = '[a-z]{1000}[a-z]{1000}[a-z]{1000}[a-z]{1000}[a-z]{1000}';

/** The reproductions: an expression and the Pod fields it reads (under spec.hostile). */
const CASES: { name: string; expression: string; data: Record<string, unknown>; limit: RegExp }[] = [
  {
    name: 'sets.contains on two split lists of 30,000 entries',
    expression: "sets.contains(object.spec.hostile.a.split(','), object.spec.hostile.b.split(','))",
    data: { a: list30k, b: list30k },
    limit: PER_CALL,
  },
  {
    name: 'sets.intersects and sets.equivalent on the same lists',
    expression: "sets.intersects(object.spec.hostile.a.split(','), ['none']) || sets.equivalent(object.spec.hostile.a.split(','), object.spec.hostile.b.split(','))",
    data: { a: list30k, b: list30k },
    limit: PER_CALL,
  },
  {
    name: 'replace on a 131k-character string, repeated',
    expression: "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(i, object.spec.hostile.s.replace('a', 'aaaaaaaaaa', 131072).size() > i)",
    data: { s: 'a'.repeat(131_072) },
    limit: PER_CALL,
  },
  {
    name: 'replace of the empty string in a 131k-character string (a gigabyte result)',
    expression: "object.spec.hostile.s.replace('', object.spec.hostile.to).size() > 0",
    data: { s: 'a'.repeat(131_072), to: 'b'.repeat(10_000) },
    limit: PER_CALL,
  },
  {
    name: '== on maps of 16,000-element lists, in a loop',
    expression: 'object.spec.hostile.loop.all(i, object.spec.hostile.m == object.spec.hostile.n)',
    data: { loop: Array.from({ length: 100 }, (_, i) => i), m: map16k(), n: map16k() },
    limit: PER_CALL,
  },
  {
    name: 'matches with a 5,000-instruction program read from the object',
    expression: "object.spec.hostile.s.matches(object.spec.hostile.p)",
    data: { s: 'a'.repeat(1000), p: REGEX_5000 },
    limit: new RegExp(`more than the ${MAX_PROGRAM_SIZE} allowed`),
  },
  {
    name: 'findAll over a long string, repeated',
    expression: "object.spec.hostile.loop.all(i, object.spec.hostile.s.findAll('[a-z]+[0-9]').size() >= 0)",
    data: { loop: Array.from({ length: 1000 }, (_, i) => i), s: 'abcdefghij'.repeat(13_000) },
    limit: PER_CALL,
  },
];

function hostilePod(data: Record<string, unknown>, namespace = 'tenant'): KubeObject {
  const p = pod({ namespace });
  (p.spec as Record<string, unknown>)['hostile'] = data;
  return p;
}

describe('a tenant PortalRule using functions that used to cost nothing', () => {
  for (const c of CASES) {
    it(`${c.name}: an error verdict naming the limit; another namespace is decided`, () => {
      const rs = new RuleSet();
      const state = rs.upsert(namespacedRule('tenant', 'hostile', { validate: { message: 'hostile', cel: { expressions: [{ expression: c.expression }] } } }));
      assert.equal(state.ready, true, state.message);
      const [v] = evaluate(rs, input(hostilePod(c.data)));
      assert.equal(v?.result, 'error');
      assert.match(v?.message ?? '', /^rule tenant\/hostile could not be evaluated: validate\.cel\.expressions\[0\] failed: /);
      assert.match(v?.message ?? '', c.limit);
      assert.equal(decideAdmission(rs, input(hostilePod(c.data))).allowed, false, 'denied under failurePolicy Fail, enforcement Deny');
      // The rule does not apply to another namespace: its requests are answered as usual.
      assert.deepEqual(decideAdmission(rs, input(pod({ namespace: 'other' }))), { allowed: true, warnings: [] });
    });
  }

  it('a constant regex of 5,000 instructions is refused when the rule compiles and when it is applied', () => {
    const rule = namespacedRule('tenant', 'regex', { validate: { message: 'm', cel: { expressions: [{ expression: `object.metadata.name.matches('${REGEX_5000}')` }] } } });
    const v = validateRule(rule);
    assert.equal(v.ok, false);
    if (!v.ok) assert.ok(v.problems.some((p) => p.includes(`more than the ${MAX_PROGRAM_SIZE} allowed`)), v.problems.join('; '));
    const rs = new RuleSet();
    const state = rs.upsert(rule);
    assert.equal(state.ready, false);
    assert.equal(state.reason, 'CompileError');
    assert.match(state.message, /spec\.validate\.cel\.expressions\[0\]\.expression: compilation failed: line 1, column \d+: regular expression .* compiles to \d+ instructions, more than the 2000 allowed/);
    assert.equal(evaluate(rs, input(pod({ namespace: 'tenant' })))[0]?.result, 'error');
  });
});

function policy(name: string, expression: string): Parameters<VapSet['upsertPolicy']>[0] {
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicy',
    metadata: { name },
    spec: {
      matchConstraints: { resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'] }] },
      validations: [{ expression }],
    },
  };
}

function podAttributes(object: KubeObject): VapAttributes {
  return {
    operation: 'CREATE',
    kind: { group: '', version: 'v1', kind: 'Pod' },
    resource: { group: '', version: 'v1', resource: 'pods' },
    subResource: '',
    namespace: String(object.metadata?.namespace ?? ''),
    name: 'web',
    namespaced: true,
    object: object as VapAttributes['object'],
    oldObject: null,
  };
}

const NO_PARAMS = { namespaceObject: null, params: { scope: () => ({ ok: false as const, error: 'no params' }), find: () => ({ ok: true as const, objects: [] }) } };

describe('the same functions inside a ValidatingAdmissionPolicy bound to one namespace', () => {
  for (const c of CASES) {
    it(`${c.name}: an error, denied under Fail`, () => {
      const set = new VapSet();
      assert.deepEqual(set.upsertPolicy(policy('hostile', c.expression)), []);
      set.upsertBinding({
        apiVersion: 'admissionregistration.k8s.io/v1',
        kind: 'ValidatingAdmissionPolicyBinding',
        metadata: { name: 'tenant-only' },
        spec: {
          policyName: 'hostile',
          validationActions: ['Deny'],
          matchResources: { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'tenant' } } },
        },
      });
      const tenant = { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'tenant', labels: { 'kubernetes.io/metadata.name': 'tenant' } } };
      const results = set.evaluate(podAttributes(hostilePod(c.data)), { ...NO_PARAMS, namespaceObject: tenant });
      const v = verdictOf(results[0]!);
      assert.equal(v.result, 'error');
      assert.match(v.message, c.limit === PER_CALL ? /cost/ : c.limit);
      assert.ok(admissionOutcome(results).denial !== undefined);
      // Another namespace: the binding does not select it, nothing is evaluated.
      const other = { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'other', labels: { 'kubernetes.io/metadata.name': 'other' } } };
      const elsewhere = set.evaluate(podAttributes(hostilePod(c.data, 'other')), { ...NO_PARAMS, namespaceObject: other });
      assert.equal(admissionOutcome(elsewhere).denial, undefined);
    });
  }

  it('a constant regex of 5,000 instructions does not compile', () => {
    const set = new VapSet();
    const errors = set.upsertPolicy(policy('regex', `object.metadata.name.matches('${REGEX_5000}')`));
    assert.equal(errors.length, 1);
    assert.match(errors[0]?.error ?? '', /^ERROR: <input>:1:\d+: regular expression .* more than the 2000 allowed/);
  });
});

describe('against a real `portal serve` (file mode)', () => {
  const RULES = `apiVersion: portal.dev/v1alpha1
kind: PortalRule
metadata: {name: hostile, namespace: tenant}
spec:
  match: {kinds: [{apiGroups: [""], kinds: [Pod]}]}
  validate:
    message: hostile
    cel:
      expressions:
        - expression: "sets.contains(object.metadata.annotations['a'].split(','), object.metadata.annotations['b'].split(','))"
        - expression: "object.metadata.annotations['a'].replace('', object.metadata.annotations['to']).size() > 0"
`;

  function hostileReview(): Record<string, unknown> {
    const r = podReview({ namespace: 'tenant' }) as { request: { object: { metadata: Record<string, unknown> } } };
    r.request.object.metadata.annotations = { a: list30k, b: list30k, to: 'x'.repeat(10_000) };
    return r;
  }

  it('the hostile request is answered with the error verdict naming the limit, and other requests and /healthz are answered too', { timeout: 120_000 }, async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'portal-cel-cost-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    await writeFile(join(dir, 'rules.yaml'), RULES);
    const s = await startServe(t, ['--policies', dir], { POD_NAME: 'portal-cel-cost' }, { ready: true });
    const ca = await readFile(s.caFile);

    // Hostile reviews and ordinary ones from another namespace, interleaved, two rounds.
    for (let round = 0; round < 2; round++) {
      const [hostile, other, health] = await Promise.all([
        review(s.webhook, ca, hostileReview(), 60_000),
        review(s.webhook, ca, podReview({ namespace: 'other' }), 60_000),
        fetch(`${s.probes}/healthz`).then(async (res) => ({ status: res.status, body: await res.text() })),
      ]);
      assert.equal(hostile.allowed, false);
      assert.match(hostile.status?.message ?? '', /rule tenant\/hostile could not be evaluated: validate\.cel\.expressions\[0\] failed: evaluation exceeded the per-expression cost limit \(1000000 units\)/);
      assert.equal(other.allowed, true, JSON.stringify(other));
      assert.equal(health.status, 200);
    }
    // The replica stays ready: rule errors are verdicts, not internal errors.
    const ready = await fetch(`${s.probes}/readyz`);
    await ready.arrayBuffer();
    assert.equal(ready.status, 200);
  });
});
