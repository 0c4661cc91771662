// What `portal dev` prints about the rules (issue 15 item 3): a rule that is
// not Ready or not Covered is listed at start-up (from the RuleSet's own
// verdict on --policies, before any replica runs) and whenever the set
// changes (from the status the leader writes); the status line counts them.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { localProblems, mergeProblems, problemNote, problemReport, problemsOf, type RuleProblem } from '../../packages/devcluster/src/dev/rule-problems.ts';
import { RuleSet, type PortalRuleObject } from '../../src/policy/index.ts';

const broken = {
  apiVersion: 'portal.dev/v1alpha1',
  kind: 'PortalClusterRule',
  metadata: { name: 'broken' },
  spec: { enforcement: 'Warn', match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }] }, validate: { cel: { expressions: [{ expression: 'object.x ==' }] } } },
};
const fine = { ...broken, metadata: { name: 'fine' }, spec: { ...broken.spec, validate: { cel: { expressions: [{ expression: 'true' }] } } } };

describe('portal dev: rules that need attention', () => {
  it('start-up: the RuleSet\'s own words for a rule from --policies that does not compile', () => {
    const local = localProblems([broken, fine]);
    assert.equal(local.length, 1);
    const state = new RuleSet().upsert(broken as unknown as PortalRuleObject);
    assert.deepEqual(local[0], { rule: 'PortalClusterRule/broken', line: `PortalClusterRule broken is not Ready (CompileError): ${state.message}` });
    assert.match(local[0]?.line ?? '', /compilation failed: line 1, column \d+/);
  });

  it('from status: Ready=False and Covered=False, each with reason and message; the same line as the local one', () => {
    const state = new RuleSet().upsert(broken as unknown as PortalRuleObject);
    const stored = {
      metadata: { name: 'broken', generation: 1 },
      status: {
        observedGeneration: 1,
        conditions: [
          { type: 'Ready', status: 'False', reason: 'CompileError', message: state.message },
          { type: 'Covered', status: 'False', reason: 'NotSentByWebhook', message: 'not sent' },
        ],
      },
    };
    const ps = problemsOf(stored, 'PortalClusterRule');
    assert.deepEqual(ps.map((p) => p.line), [localProblems([broken])[0]?.line, 'PortalClusterRule broken is not covered (NotSentByWebhook): not sent']);
    assert.deepEqual(problemsOf({ metadata: { name: 'r', namespace: 'shop' }, status: { conditions: [{ type: 'Ready', status: 'True' }, { type: 'Covered', status: 'True' }] } }, 'PortalRule'), []);
  });

  it('from status: TypeChecked=False names the fields (issue 33); Unknown is not a problem', () => {
    const stored = (status: string) => ({
      metadata: { name: 'audit-typo' },
      status: { conditions: [{ type: 'Ready', status: 'True' }, { type: 'TypeChecked', status, reason: status === 'False' ? 'FieldNotFound' : 'SchemaUnknown', message: 'spec.replcas: no such field in apps/v1 Deployment' }] },
    });
    assert.deepEqual(problemsOf(stored('False'), 'PortalClusterRule').map((p) => p.line), [
      'PortalClusterRule audit-typo reads fields its kinds do not have (FieldNotFound): spec.replcas: no such field in apps/v1 Deployment',
    ]);
    assert.deepEqual(problemsOf(stored('Unknown'), 'PortalClusterRule'), []);
  });

  it('a local problem stands in for a rule until its status is written; reports only changes; the status line counts rules', () => {
    const local = localProblems([broken]);
    // No status yet: the local line stays (no "all fine" before the leader has spoken).
    const pending = mergeProblems({ problems: [], pending: new Set(['PortalClusterRule/broken']) }, local);
    assert.deepEqual(pending, local);
    assert.deepEqual(problemReport(local, pending), [], 'nothing changed, nothing printed');
    // Status written with the same words: still nothing new to print.
    assert.deepEqual(problemReport(local, mergeProblems({ problems: local, pending: new Set() }, local)), []);
    const more: RuleProblem[] = [...local, { rule: 'PortalClusterRule/cm', line: 'PortalClusterRule cm is not covered (AuditForbidden): x' }, { rule: 'PortalClusterRule/cm', line: 'PortalClusterRule cm is not Ready (CompileError): y' }];
    const report = problemReport(local, more);
    assert.match(report[0] ?? '', /^portal dev: 2 rules need attention/);
    assert.equal(report.length, 4);
    assert.equal(problemNote(more), ' · 2 rules need attention');
    assert.equal(problemNote(local), ' · 1 rule needs attention');
    // Fixed: said once.
    assert.deepEqual(problemReport(more, mergeProblems({ problems: [], pending: new Set() }, local)), ['portal dev: every rule is Ready and covered now']);
    assert.equal(problemNote([]), '');
  });
});
