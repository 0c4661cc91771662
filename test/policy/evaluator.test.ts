import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decide, evaluate, MAX_WARNING_LENGTH, RuleSet, violationMessage, type RuleVerdict } from '../../src/policy/index.ts';
import { clusterRule, input, pod } from './support.ts';

const threePrivileged = {
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name: 'p', namespace: 'default' },
  spec: { containers: [0, 1, 2, 3].map((i) => ({ name: `c${i}`, image: 'x', securityContext: { privileged: true } })) },
};

void describe('evaluate', () => {
  void it('Deny -> fail, Warn and Audit -> warn, compliant -> pass', () => {
    const rs = new RuleSet();
    rs.upsert(clusterRule('deny'));
    rs.upsert(clusterRule('warn', { enforcement: 'Warn' }));
    rs.upsert(clusterRule('audit', { enforcement: 'Audit', severity: 'low', category: 'Best Practices' }));
    const bad = evaluate(rs, input(pod({ privileged: true })));
    assert.deepEqual(bad.map((v) => [v.rule, v.enforcement, v.result]), [
      ['audit', 'Audit', 'warn'],
      ['deny', 'Deny', 'fail'],
      ['warn', 'Warn', 'warn'],
    ]);
    assert.equal(bad[0]?.severity, 'low');
    assert.equal(bad[0]?.category, 'Best Practices');
    assert.deepEqual(evaluate(rs, input(pod())).map((v) => v.result), ['pass', 'pass', 'pass']);
  });
  void it('names the rule, its message and the schema\'s first error with its path (evaluation stops there, issue 31)', () => {
    const rs = new RuleSet();
    rs.upsert(clusterRule('no-priv'));
    const [v] = evaluate(rs, input(threePrivileged));
    assert.equal(v?.violations.length, 1);
    assert.equal(v?.message, 'no-priv: Privileged containers are not allowed. [spec.containers[0].securityContext.privileged: must be equal to false]');
  });
  void it('the message shows at most 3 violations and counts the rest', () => {
    const violations = [0, 1, 2, 3].map((i) => ({ path: `spec.containers[${i}].securityContext.privileged`, message: 'must be equal to false' }));
    assert.equal(
      violationMessage('no-priv', 'Privileged containers are not allowed.', violations),
      'no-priv: Privileged containers are not allowed. [spec.containers[0].securityContext.privileged: must be equal to false, ' +
        'spec.containers[1].securityContext.privileged: must be equal to false, spec.containers[2].securityContext.privileged: must be equal to false, and 1 more]',
    );
  });
  void it('formats required, enum and odd keys readably', () => {
    const rs = new RuleSet();
    rs.upsert(
      clusterRule('shape', {
        validate: {
          schema: {
            required: ['spec'],
            properties: {
              metadata: { properties: { annotations: { properties: { 'example.com/mode': { enum: ['a', 'b'] } } } } },
              spec: { required: ['securityContext'] },
            },
          },
        },
      }),
    );
    const obj = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', namespace: 'default', annotations: { 'example.com/mode': 'c' } }, spec: {} };
    const [v] = evaluate(rs, input(obj));
    assert.deepEqual(v?.violations, [{ path: 'metadata.annotations["example.com/mode"]', message: 'must be one of "a", "b"' }]);
    obj.metadata.annotations['example.com/mode'] = 'a';
    assert.deepEqual(evaluate(rs, input(obj))[0]?.violations, [{ path: 'spec.securityContext', message: 'is required' }]);
    assert.match(v?.message ?? '', /^shape: the object violates this rule \[/);
  });
  void it('a request without an object to validate is an error, not a pass', () => {
    const rs = new RuleSet();
    rs.upsert(clusterRule('r'));
    assert.equal(evaluate(rs, input(null, { namespace: 'default' }))[0]?.result, 'error');
  });
  void it('is fast: a small rule set on a Pod stays in microseconds', () => {
    const rs = new RuleSet();
    for (let i = 0; i < 17; i++) rs.upsert(clusterRule(`r${i}`));
    const req = input(pod());
    const n = 20_000;
    const t = performance.now();
    for (let i = 0; i < n; i++) evaluate(rs, req);
    const perEval = ((performance.now() - t) * 1000) / n;
    // Generous bound for a shared 2-core machine; the benchmark measures it properly.
    assert.ok(perEval < 200, `${perEval.toFixed(1)} µs per evaluation`);
  });
});

function v(rule: string, enforcement: RuleVerdict['enforcement'], result: RuleVerdict['result'], message = `${rule}: Bad. [spec.x: must be equal to false]`): RuleVerdict {
  return {
    rule,
    ruleKind: 'PortalClusterRule',
    enforcement,
    severity: 'high',
    category: '',
    result,
    message,
    violations: result === 'fail' || result === 'warn' ? [{ path: 'spec.x', message: 'must be equal to false' }] : [],
  };
}

void describe('decide', () => {
  void it('allows with nothing to report', () => {
    assert.deepEqual(decide([]), { allowed: true, warnings: [] });
    assert.deepEqual(decide([v('a', 'Deny', 'pass'), v('b', 'Deny', 'skip')]), { allowed: true, warnings: [] });
  });
  void it('denies with 403 naming every violated Deny rule', () => {
    const d = decide([v('a', 'Deny', 'fail'), v('b', 'Deny', 'pass'), v('c', 'Deny', 'fail')]);
    assert.equal(d.allowed, false);
    assert.ok(!d.allowed);
    assert.equal(d.code, 403);
    assert.equal(d.message, 'denied by 2 rules: a: Bad. [spec.x: must be equal to false]; c: Bad. [spec.x: must be equal to false]');
  });
  void it('a rule error follows failurePolicy, then enforcement (docs/design.md §10.3)', () => {
    const err = (rule: string, enf: RuleVerdict['enforcement'], fp?: 'Fail' | 'Ignore'): RuleVerdict => ({
      ...v(rule, enf, 'error', `rule ${rule} could not be evaluated: it has never compiled: x`),
      ...(fp ? { failurePolicy: fp } : {}),
    });
    const deny = decide([err('a', 'Deny')]);
    assert.ok(!deny.allowed);
    assert.equal(deny.code, 403);
    assert.match(deny.message, /^rule a could not be evaluated: /);
    assert.deepEqual(decide([err('a', 'Warn')]), { allowed: true, warnings: ['rule a could not be evaluated: it has never compiled: x'] });
    assert.deepEqual(decide([err('a', 'Audit', 'Fail')]), { allowed: true, warnings: [] });
    for (const enf of ['Deny', 'Warn', 'Audit'] as const) assert.deepEqual(decide([err('a', enf, 'Ignore')]), { allowed: true, warnings: [] }, enf);
    const long = decide([{ ...err('a', 'Warn'), message: `rule a could not be evaluated: ${'x'.repeat(300)}` }]);
    assert.ok(long.allowed && long.warnings[0] !== undefined && long.warnings[0].length <= MAX_WARNING_LENGTH);
  });
  void it('Warn gives one short warning per rule without a "Warning:" prefix; Audit is silent', () => {
    const long = v('w2', 'Warn', 'warn', `w2: ${'Very long message. '.repeat(20)} [spec.x: must be equal to false]`);
    const d = decide([v('w1', 'Warn', 'warn'), long, v('quiet', 'Audit', 'warn')]);
    assert.equal(d.allowed, true);
    assert.equal(d.warnings.length, 2);
    assert.equal(d.warnings[0], 'w1: Bad. (spec.x: must be equal to false)');
    for (const w of d.warnings) {
      assert.ok(w.length <= MAX_WARNING_LENGTH && w.length < 120, w);
      assert.doesNotMatch(w, /^Warning:/);
    }
    assert.ok(d.warnings[1]?.endsWith('…'));
  });
  void it('a warning too long is cut at a word and keeps the fix: message without the detail, then the remedy (issue 33 item 7)', () => {
    const violation = [{ path: 'spec.containers[0].securityContext.allowPrivilegeEscalation', message: 'must be equal to false' }];
    const verdict = (rule: string, message: string): RuleVerdict => ({ ...v(rule, 'Warn', 'warn', `${rule}: ${message} [x]`), violations: violation });
    // The PSS message with its detail is 200 characters: the rule's name and the remedy fit.
    const pss = decide([verdict('disallow-privilege-escalation', 'Privilege escalation must be disallowed; set securityContext.allowPrivilegeEscalation to false in every container.')]);
    assert.deepEqual(pss.warnings, ['disallow-privilege-escalation: set securityContext.allowPrivilegeEscalation to false in every container.']);
    // Too long with the detail, short enough without it: the whole message.
    const short = decide([verdict('no-latest', 'Pin the image; do not use :latest.')]);
    assert.equal(short.warnings[0], 'no-latest: Pin the image; do not use :latest.');
    // No remedy clause and still too long: cut at a word, never inside one, with nothing dangling before the mark.
    const words = 'Every container image must come from the internal registry mirror and carry a digest pinned by the release pipeline always';
    const cut = decide([verdict('registry', words)]).warnings[0]!;
    assert.ok(cut.length <= MAX_WARNING_LENGTH, cut);
    assert.ok(cut.endsWith('…'));
    const kept = cut.slice('registry: '.length, -1);
    assert.ok(words.startsWith(kept) && words[kept.length] === ' ', `cut inside a word: ${cut}`);
    // One unbroken token longer than the room: cut inside it (nothing else to do), still bounded.
    const token = decide([verdict('t', 'x'.repeat(300))]).warnings[0]!;
    assert.equal(token.length, MAX_WARNING_LENGTH);
  });
  void it('keeps warnings when denying', () => {
    const d = decide([v('a', 'Deny', 'fail'), v('w', 'Warn', 'warn')]);
    assert.equal(d.allowed, false);
    assert.deepEqual(d.warnings, ['w: Bad. (spec.x: must be equal to false)']);
  });
});

describe('a schema that throws on a hostile object', () => {
  it('gives an error verdict for that rule only, which denies', () => {
    // A recursive $ref walks as deep as the object: deep enough, the stack
    // overflows inside ajv's generated code.
    const recursive = { $defs: { node: { type: 'object', properties: { next: { $ref: '#/$defs/node' } } } }, $ref: '#/$defs/node' };
    const rules = new RuleSet();
    rules.upsert(clusterRule('recursive', { match: { kinds: [{ apiGroups: [''], kinds: ['ConfigMap'] }] }, validate: { message: 'm', schema: recursive } }));
    rules.upsert(clusterRule('other', { match: { kinds: [{ apiGroups: [''], kinds: ['ConfigMap'] }] }, validate: { message: 'm', schema: true } }));
    let deep: Record<string, unknown> = {};
    for (let i = 0; i < 100_000; i++) deep = { next: deep };
    const cm = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c', namespace: 'default' }, ...deep };
    const verdicts = evaluate(rules, input(cm));
    const byRule = Object.fromEntries(verdicts.map((v) => [v.rule, v]));
    assert.equal(byRule['recursive']?.result, 'error');
    assert.match(byRule['recursive']?.message ?? '', /recursive could not be evaluated: its schema failed on this object/);
    assert.equal(byRule['other']?.result, 'pass');
    const decision = decide(verdicts);
    assert.equal(decision.allowed, false);
  });
});
