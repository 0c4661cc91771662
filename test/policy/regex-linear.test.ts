// Issue 9, item 1: no rule can stall a replica. The two patterns of the
// issue run on RE2 in time linear in the input, through the real path (a
// rule's schema compiled by the RuleSet, evaluated by decideAdmission); and
// the evaluation budget turns the rules left when it runs out into `error`
// verdicts (a denial) instead of running on.
//
// Timing assertions are ratios between input sizes measured in the same run,
// never absolute times, so a slow or loaded machine cannot fail them: with
// sizes 32 KiB → 1 MiB (32x), a linear engine grows ~32x, a quadratic one
// ~1000x and a backtracking one never finishes (the test's timeout).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decideAdmission, evaluate, RuleSet, type EvaluationBudget } from '../../src/policy/index.ts';
import { clusterRule, input, pod } from './support.ts';

const PATTERNS = ['^.*a.*a.*a.*a.*b$', '^(a+)+$'];
const SIZES = [10, 1024, 32 * 1024, 1024 * 1024];

function annotationRule(name: string, pattern: string, enforcement: 'Deny' | 'Warn' = 'Deny') {
  return clusterRule(name, {
    enforcement,
    validate: {
      message: 'annotation note must match',
      schema: { properties: { metadata: { properties: { annotations: { properties: { note: { type: 'string', pattern } } } } } } },
    },
  });
}

function withNote(note: string) {
  const p = pod();
  (p.metadata as Record<string, unknown>).annotations = { note };
  return input(p, { namespace: 'default', name: 'web' });
}

/** Fastest of `runs` evaluations, in ms (the minimum filters scheduler noise). */
function fastest(rules: RuleSet, note: string, runs: number): { ms: number; allowed: boolean } {
  const inp = withNote(note);
  let best = Infinity;
  let allowed = false;
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    allowed = decideAdmission(rules, inp).allowed;
    best = Math.min(best, performance.now() - t0);
  }
  return { ms: best, allowed };
}

void describe('the patterns of issue 9 decide in linear time (RE2)', { timeout: 120_000 }, () => {
  for (const pattern of PATTERNS) {
    void it(`/${pattern}/ on 10 characters to 1 MiB`, () => {
      const rules = new RuleSet();
      const state = rules.upsert(annotationRule('note-pattern', pattern));
      assert.equal(state.ready, true, state.message);
      // Worst cases: all "a" (the backtracking blow-up) without the final
      // "b" (no match) and with an "x" at the end (no match for ^(a+)+$).
      const times = SIZES.map((n) => {
        const hostile = `${'a'.repeat(n - 1)}x`;
        const r = fastest(rules, hostile, n >= 1024 * 1024 ? 3 : 7);
        assert.equal(r.allowed, false, `a ${n}-character non-matching value is denied`);
        return r.ms;
      });
      // Correct answers on matching values too.
      assert.equal(fastest(rules, pattern.includes('b') ? 'aaaab' : 'aaaa', 1).allowed, true);
      const [, , t32k, t1m] = times as [number, number, number, number];
      const ratio = t1m / Math.max(t32k, 0.01);
      assert.ok(ratio < 32 * 8, `32x more input took ${ratio.toFixed(1)}x longer (${times.map((t) => t.toFixed(2)).join(' / ')} ms): not linear`);
    });
  }
});

/** A clock that advances `step` ms each time it is read. */
function steppingClock(step: number): EvaluationBudget['now'] {
  let t = 0;
  return () => (t += step);
}

void describe('the evaluation budget (cooperative deadline)', () => {
  void it('rules left when the budget runs out give error verdicts, naming the rule, and the request is denied', () => {
    const rules = new RuleSet();
    for (const name of ['a-first', 'b-second', 'c-third']) rules.upsert(annotationRule(name, '^[a-z]+$'));
    // Each clock read (one per rule here: the values are too short to read it per regex) advances 10 ms:
    // the first rule starts in budget, later ones after it.
    const budget: EvaluationBudget = { deadline: 15, now: steppingClock(10), ms: 15 };
    const verdicts = evaluate(rules, withNote('fine'), budget);
    assert.deepEqual(
      verdicts.map((v) => [v.rule, v.result]),
      [
        ['a-first', 'pass'],
        ['b-second', 'error'],
        ['c-third', 'error'],
      ],
    );
    assert.match(verdicts[1]?.message ?? '', /^rule b-second could not be evaluated: the evaluation time budget \(15 ms\) ran out before this rule ran/);
    const d = decideAdmission(rules, withNote('fine'), { deadline: 15, now: steppingClock(10), ms: 15 });
    assert.equal(d.allowed, false);
    assert.match((d as { message: string }).message, /denied by 2 rules: rule b-second could not be evaluated.*rule c-third could not be evaluated/);
  });

  void it('the deadline also stops between two regular expressions of the same rule', () => {
    const rules = new RuleSet();
    rules.upsert(
      clusterRule('two-patterns', {
        validate: {
          schema: { properties: { metadata: { properties: { name: { pattern: '^[a-z]+$' }, namespace: { pattern: '^[a-z]+$' } } } } },
        },
      }),
    );
    // Read 1 (rule start) is in budget; read 2 (first regex) in budget; read 3 (second regex) is past it.
    // Values long enough that each test reads the clock (≥ 2^16 units of regex work).
    const long = 'a'.repeat(20_000);
    const verdicts = evaluate(rules, input(pod({ name: long, namespace: long })), { deadline: 25, now: steppingClock(10), ms: 25 });
    assert.equal(verdicts[0]?.result, 'error');
    assert.match(verdicts[0]?.message ?? '', /the evaluation time budget ran out before this regular expression ran/);
  });

  void it('without a budget (portal test, audit) or within it, nothing changes', () => {
    const rules = new RuleSet();
    rules.upsert(annotationRule('r', '^[a-z]+$'));
    assert.deepEqual(evaluate(rules, withNote('ok')).map((v) => v.result), ['pass']);
    assert.deepEqual(evaluate(rules, withNote('ok'), { deadline: 1e9, now: steppingClock(1), ms: 1e9 }).map((v) => v.result), ['pass']);
    assert.deepEqual(evaluate(rules, withNote('NO'), { deadline: 1e9, now: steppingClock(1), ms: 1e9 }).map((v) => v.result), ['fail']);
  });
});
