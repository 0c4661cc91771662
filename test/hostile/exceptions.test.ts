/**
 * Hostile PortalExceptions (issue 18): whatever an exception's author writes,
 * the rule set never throws, an exception never exempts by accident (an
 * error, a cost overrun, a deadline, a malformed field all mean "not
 * exempted"), and the work per request stays bounded.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decideAdmission, RuleSet, validateExceptionShape } from '../../src/policy/index.ts';
import { clusterRule, exception, input, pod } from '../policy/support.ts';

const NOW = Date.parse('2026-06-01T00:00:00Z');
const privileged = () => input(pod({ privileged: true, namespace: 'monitoring', name: 'node-agent-1' }), { now: NOW });

void describe('hostile PortalExceptions', () => {
  void it('garbage never throws out of upsertException and exempts nothing', () => {
    const rs = new RuleSet();
    rs.upsert(clusterRule('no-priv'));
    const garbage: unknown[] = [
      null,
      [],
      'a string',
      { kind: 'PortalException' },
      { apiVersion: 'portal.dev/v1alpha1', kind: 'PortalException', metadata: { name: 'x', namespace: 'monitoring' }, spec: { rules: { no: 'priv' }, match: [], reason: 5 } },
      { ...exception('monitoring', 'y'), spec: { ...exception('monitoring', 'y').spec, rules: ['no-priv'], match: { kinds: 'Pod' } } },
      exception('monitoring', 'far', { expiresAt: '99999-01-01T00:00:00Z' }),
      exception('monitoring', 'long-reason', { reason: 'x'.repeat(1_000_000) }),
      exception('monitoring', 'many-names', { match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }], names: Array.from({ length: 10_000 }, (_, i) => `n${i}`) } }),
      exception('monitoring', 'many-rules', { rules: Array.from({ length: 10_000 }, (_, i) => `r${i}`) }),
    ];
    for (const g of garbage) {
      const state = rs.upsertException(g);
      assert.equal(state.valid, false, JSON.stringify(g)?.slice(0, 120));
    }
    assert.equal(decideAdmission(rs, privileged()).allowed, false);
  });

  void it('a matchCondition that runs past its cost limit does not exempt, and is cut short', () => {
    const rs = new RuleSet();
    rs.upsert(clusterRule('no-priv'));
    const big = `[${Array.from({ length: 200 }, (_, i) => i).join(',')}]`;
    const ex = exception('monitoring', 'costly', { matchConditions: [{ name: 'spin', expression: `${big}.all(a, ${big}.all(b, ${big}.all(c, a + b + c >= 0)))` }] });
    assert.equal(validateExceptionShape(ex).ok, true);
    rs.upsertException(ex);
    const started = process.cpuUsage();
    assert.equal(decideAdmission(rs, privileged()).allowed, false);
    const used = process.cpuUsage(started);
    // 8,000,000 iterations would take seconds; the per-call limit (1,000,000 units) stops it.
    assert.ok((used.user + used.system) / 1000 < 2000, `${(used.user + used.system) / 1000} ms of CPU`);
  });

  void it('past the evaluation deadline no matchCondition runs: not exempted, never a late allow', () => {
    const rs = new RuleSet();
    rs.upsert(clusterRule('no-priv'));
    rs.upsertException(exception('monitoring', 'cel', { matchConditions: [{ name: 'yes', expression: 'true' }] }));
    assert.equal(decideAdmission(rs, privileged()).allowed, true);
    let t = 0;
    const late = decideAdmission(rs, privileged(), { deadline: 0, now: () => ++t, ms: 0 });
    assert.equal(late.allowed, false);
    assert.equal(late.exempted, undefined);
  });

  void it('a thousand exceptions in the namespace of the request, none covering: bounded, not exempted', () => {
    const rs = new RuleSet();
    rs.upsert(clusterRule('no-priv'));
    for (let i = 0; i < 1000; i++) rs.upsertException(exception('monitoring', `e${i}`, { match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }], names: [`other-${i}-*`] }, matchConditions: [{ name: 'c', expression: 'object.spec.containers.size() > 0' }] }));
    const started = process.cpuUsage();
    for (let i = 0; i < 10; i++) assert.equal(decideAdmission(rs, privileged()).allowed, false);
    const used = process.cpuUsage(started);
    // The names miss before any CEL runs: ~1,000 cheap checks per request.
    assert.ok((used.user + used.system) / 1000 / 10 < 200, `${(used.user + used.system) / 1000 / 10} ms per request`);
  });

  void it('a matchCondition reading a missing field errs: not exempted', () => {
    const rs = new RuleSet();
    rs.upsert(clusterRule('no-priv'));
    rs.upsertException(exception('monitoring', 'err', { matchConditions: [{ name: 'missing', expression: "object.metadata.labels['nope'] == 'x'" }] }));
    assert.equal(decideAdmission(rs, privileged()).allowed, false);
  });
});
