/**
 * Runs a loaded suite: every resource is evaluated once (the OfflineEvaluator
 * of the ad-hoc mode, in the same evaluation thread of bounded memory, so
 * both modes give the same verdicts), then each
 * expectation is compared with the verdict it names, and every verdict no
 * expectation names is collected.
 */
import type { RuleVerdict, Verdict } from '../../policy/index.ts';
import type { EvaluationThread } from '../offline/evaluation-thread.ts';
import type { ExpectationOutcome, SuiteProblem, UnlistedVerdict } from './format.ts';
import { resourceKey, type LoadedSuite } from './load.ts';

/**
 * Without `binding`, a policy's verdict on a resource is the strongest of its
 * bindings' verdicts (a Portal rule has exactly one): what the request would
 * meet first is what the suite states.
 */
const STRENGTH: Record<Verdict, number> = { error: 4, fail: 3, warn: 2, pass: 1, skip: 0 };

export interface SuiteRun {
  /** Results that mean nothing (a CEL cost overrun, a missing param): bad input, as in the ad-hoc mode. */
  problems: SuiteProblem[];
  expectations: ExpectationOutcome[];
  unlisted: UnlistedVerdict[];
}

export async function runSuite(s: LoadedSuite, thread: EvaluationThread): Promise<SuiteRun> {
  const verdicts = new Map<string, RuleVerdict[]>();
  const problems = new Set<string>();
  const items = s.resources.map((resource) => {
    const request = s.request.operation === 'UPDATE' ? { ...s.request, oldObject: s.oldObjects.get(resourceKey(resource.ref)) ?? null } : s.request;
    return { resource, request };
  });
  const evaluations = await thread.evaluate(s.setup, items);
  s.resources.forEach((r, i) => {
    const e = evaluations[i]!;
    for (const p of [...e.overruns, ...e.problems]) problems.add(p);
    verdicts.set(resourceKey(r.ref), e.verdicts);
  });
  if (problems.size > 0) {
    return { problems: [...problems].map((message) => ({ file: s.file, message: `${message} (the verdicts would not mean anything; fix the policy or the suite)` })), expectations: [], unlisted: [] };
  }

  const covered = new Set<string>();
  const expectations: ExpectationOutcome[] = s.expectations.map(({ entry, line, resource }) => {
    const spec = s.spec.results[entry] as (typeof s.spec.results)[number];
    const key = resourceKey(resource.ref);
    covered.add(`${spec.rule}\u0000${spec.binding ?? ''}\u0000${key}`);
    const mine = (verdicts.get(key) ?? []).filter((v) => v.rule === spec.rule && (spec.binding === undefined || v.reportRule === spec.binding));
    const strongest = mine.reduce<RuleVerdict | undefined>((a, v) => (a === undefined || STRENGTH[v.result] > STRENGTH[a.result] ? v : a), undefined);
    const got = strongest?.result ?? 'none';
    const message = strongest?.message ?? `${spec.rule} gives no verdict on ${resource.ref.kind} ${resource.ref.name}: it does not match this kind${spec.binding === undefined ? ' (or the policy has no binding)' : ''}`;
    const ok = got === spec.result && (spec.messageContains === undefined || message.includes(spec.messageContains));
    const out: ExpectationOutcome = {
      line,
      rule: spec.rule,
      kind: resource.ref.kind,
      namespace: resource.ref.namespace,
      name: resource.ref.name,
      expected: spec.result,
      got,
      message,
      ok,
    };
    if (spec.binding !== undefined) out.binding = spec.binding;
    if (spec.messageContains !== undefined) out.messageContains = spec.messageContains;
    return out;
  });

  const unlisted: UnlistedVerdict[] = [];
  for (const r of s.resources) {
    const key = resourceKey(r.ref);
    for (const v of verdicts.get(key) ?? []) {
      if (covered.has(`${v.rule}\u0000\u0000${key}`) || covered.has(`${v.rule}\u0000${v.reportRule ?? ''}\u0000${key}`)) continue;
      const u: UnlistedVerdict = { rule: v.rule, kind: r.ref.kind, namespace: r.ref.namespace, name: r.ref.name, result: v.result, message: v.message };
      if (v.reportRule !== undefined) u.binding = v.reportRule;
      unlisted.push(u);
    }
  }
  return { problems: [], expectations, unlisted };
}
