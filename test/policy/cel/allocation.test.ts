/**
 * The pass path allocates nothing, or one fixed frame: a CEL composition
 * whose conditions hold and whose validations pass (checkComposition, the
 * rule path) allocates nothing without variables and, with variables, only
 * its evaluation's context and frame (src/policy/cel/variable-frame.ts: young
 * objects, cheaper than the write barriers of state kept on the compiled
 * composition), the same whatever the object's size; a VAP policy's pass
 * check (src/policy/vap/pass-check.ts) leaves no garbage per evaluation
 * once warm. Garbage is what made these paths slow (GC was a
 * third of a VAP evaluation once), so a change that allocates again should
 * be seen here, not in a benchmark.
 *
 * How: V8's young generation ("new_space") only grows between two
 * scavenges, by what is allocated; 20,000 evaluations allocating even one
 * small object each would add hundreds of KB. Other work (the test
 * runner, the compiler) can only add, and a scavenge can only lower the
 * figure (then the window is discarded): so the smallest growth over a few
 * windows is an upper bound of what the evaluations allocate.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { getHeapSpaceStatistics } from 'node:v8';
import { celContext, checkComposition, compileComposition, contextFor, newBudget, type Composition } from '../../../src/policy/cel/index.ts';
import { celEngine } from '../../../src/policy/vap/cel-adapter.ts';
import { compilePolicy } from '../../../src/policy/vap/compiled.ts';
import { policy } from '../vap/support.ts';

const RUNS = 20_000;

function youngUsed(): number {
  return getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')?.space_used_size ?? NaN;
}

/** The smallest young-generation growth per call of `f` over windows of RUNS calls without a scavenge. */
function bytesPerCall(f: () => unknown): number {
  for (let i = 0; i < RUNS; i++) f();
  let best = Infinity;
  for (let window = 0; window < 8; window++) {
    const before = youngUsed();
    for (let i = 0; i < RUNS; i++) f();
    const grown = youngUsed() - before;
    if (grown >= 0) best = Math.min(best, grown / RUNS);
  }
  return best;
}

const POD = { kind: 'Pod', spec: { containers: [{ name: 'a', image: 'x', securityContext: { privileged: false, runAsNonRoot: true } }, { name: 'b', image: 'y' }], hostNetwork: false } };

/** A Pod with `n` containers. */
function pod(n: number): Record<string, unknown> {
  const containers = Array.from({ length: n }, (_, i) => ({ name: `c${i}`, image: 'x', ...(i === 0 ? { securityContext: { privileged: false, runAsNonRoot: true } } : {}) }));
  return { kind: 'Pod', spec: { containers, hostNetwork: false } };
}

/** Bytes per checkComposition of `c` on a Pod of `n` containers, warm, with its request's budget. */
function compositionBytes(c: Composition, n: number): number {
  const budget = newBudget();
  const activation = { object: pod(n) };
  const context = contextFor(activation, budget, () => celContext(activation));
  const run = (): unknown => {
    budget.remaining = 10_000_000;
    return checkComposition(c, context, budget);
  };
  assert.equal(run(), undefined);
  return bytesPerCall(run);
}

function compiled(spec: Parameters<typeof compileComposition>[0]): Composition {
  const c = compileComposition(spec);
  if (!c.ok) assert.fail(JSON.stringify(c.errors));
  return c;
}

void describe('the pass path allocates nothing, or one fixed frame', () => {
  const validations = [
    { expression: '!object.spec.?hostNetwork.orValue(false)' },
    { expression: "object.spec.containers.all(c, !c.?securityContext.?privileged.orValue(false) && c.?securityContext.?runAsNonRoot.orValue(true) == true && c.image != '')" },
  ];

  void it('a CEL composition without variables whose validations pass allocates nothing (checkComposition)', () => {
    const c = compiled({ matchConditions: [{ name: 'pod', expression: "object.kind == 'Pod'" }], validations });
    const bytes = compositionBytes(c, 2);
    assert.ok(bytes < 1, `${bytes} bytes per evaluation`);
  });

  void it('a CEL composition with variables whose validations pass allocates one frame, whatever the object (checkComposition)', () => {
    const c = compiled({
      matchConditions: [{ name: 'pod', expression: "object.kind == 'Pod'" }],
      variables: [{ name: 'all', expression: 'object.spec.containers + object.spec.?initContainers.orValue([])' }],
      validations: [
        validations[0]!,
        { expression: "variables.all.all(c, !c.?securityContext.?privileged.orValue(false) && c.?securityContext.?runAsNonRoot.orValue(true) == true && c.image != '')" },
      ],
    });
    const small = compositionBytes(c, 2);
    const large = compositionBytes(c, 200);
    // The context (7 fields), the frame (6) and its values (1): about 200 bytes.
    assert.ok(small < 320, `${small} bytes per evaluation`);
    assert.ok(Math.abs(large - small) < 1, `${small} bytes per evaluation on 2 containers, ${large} on 200`);
  });

  void it("a VAP policy's pass check, variables included", () => {
    const p = compilePolicy(
      policy('p', {
        variables: [
          { name: 'podSpec', expression: 'object.spec' },
          { name: 'containers', expression: 'variables.podSpec.containers + variables.podSpec.?initContainers.orValue([])' },
        ],
        validations: [{ expression: '!variables.podSpec.?hostNetwork.orValue(false)' }, { expression: 'variables.containers.all(c, c.?securityContext.?privileged.orValue(false) == false)' }],
      }),
      celEngine(),
    );
    const check = p.passCheck;
    if (check === undefined) assert.fail('the policy has a pass check');
    const run = (): boolean => check(POD, null, null, null, null, undefined, undefined);
    assert.equal(run(), true);
    const bytes = bytesPerCall(run);
    assert.ok(bytes < 1, `${bytes} bytes per evaluation`);
  });
});
