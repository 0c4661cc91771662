/**
 * ValidatingAdmissionPolicies in the audit (docs/design.md §8): an
 * {@link AuditPolicySource} over the VapInformerSource, so every replica
 * evaluates existing objects against every bound policy and the actuator
 * writes the results into the same reports as the Portal rules
 * (`policy` = the VAP name, `rule` = the binding name, `source: portal`).
 *
 * Kinds: the audit watches the built-in kinds a policy's resourceRules name
 * (e.g. `apps` + `deployments` → Deployment); `*` and custom resources are not
 * enumerated (a policy over them is enforced by the API server and tested by
 * `portal test`, but not audited yet).
 */
import type { VapInformerSource } from '../sources/vap-informers.ts';
import type { EvaluationInput, RuleVerdict } from '../policy/types.ts';
import type { RuleAction } from '../policy/types.ts';
import type { KubeObject } from '../policy/types.ts';
import { guessResource, parseAuditActions, vapVerdicts, type BindingEvaluation, type ValidatingAdmissionPolicy, type VapAttributes } from '../policy/vap/index.ts';
import type { AuditPolicySource } from './evaluator.ts';
import { BUILTIN_KINDS } from './kind-resources.ts';
import { problemsOf, type VapProblem } from './vap-events.ts';

/** Where evaluation problems go (every replica; see vap-events.ts). */
export type VapProblemSink = (policy: ValidatingAdmissionPolicy | undefined, problem: VapProblem, policyName: string) => void;

const byResource = new Map(BUILTIN_KINDS.map((r) => [`${r.group}/${r.resource}`, r]));
const byKind = new Map(BUILTIN_KINDS.map((r) => [`${r.group}/${r.kind}`, r]));

/** Evaluates every bound policy for one object: the audit evaluation pool on a replica (adr/0013). */
export type VapRun = (attrs: VapAttributes, namespaceObject: KubeObject | null) => BindingEvaluation[] | Promise<BindingEvaluation[]>;

export class VapAuditPolicySource implements AuditPolicySource {
  readonly name = 'validatingadmissionpolicies';
  private readonly run: VapRun;

  /** `run` defaults to evaluating on this thread, over the source's VapSet and params. */
  constructor(
    private readonly source: VapInformerSource,
    private readonly problems?: VapProblemSink,
    run?: VapRun,
  ) {
    this.run = run ?? ((attrs, namespaceObject) => source.evaluate(attrs, namespaceObject));
  }

  get revision(): number {
    return this.source.revision;
  }

  #policies(): ValidatingAdmissionPolicy[] {
    return this.source.policies.list() as unknown as ValidatingAdmissionPolicy[];
  }

  *matchedKinds(): Iterable<{ group: string; kind: string }> {
    for (const p of this.#policies()) {
      for (const rule of p.spec?.matchConstraints?.resourceRules ?? []) {
        for (const group of rule.apiGroups ?? []) {
          for (const res of rule.resources ?? []) {
            const plain = res.split('/')[0] ?? '';
            const known = byResource.get(`${group}/${plain}`);
            if (known) yield { group: known.group, kind: known.kind };
          }
        }
      }
    }
  }

  /** Parsed `policies.portal.dev/audit-actions`, per policy resourceVersion. */
  readonly #actions = new Map<string, { rv: string; actions: readonly RuleAction[] }>();

  /**
   * The policy's audit actions (docs/design.md §8). An annotation that does not parse
   * gives no actions (the problems are what `parseAuditActions` reports;
   * `portal test` and docs/vap.md show the format).
   */
  actionsFor(rule: string): readonly RuleAction[] | undefined {
    const p = this.source.policies.get(rule) as unknown as ValidatingAdmissionPolicy | undefined;
    if (!p) return undefined;
    const rv = p.metadata.resourceVersion ?? '';
    const hit = this.#actions.get(rule);
    if (hit && hit.rv === rv) return hit.actions;
    const parsed = parseAuditActions(p.metadata.annotations);
    const actions = parsed.ok ? parsed.actions : [];
    this.#actions.set(rule, { rv, actions });
    return actions;
  }

  *#keys(): Iterable<string> {
    for (const p of this.#policies()) yield `vap:${p.metadata.name}`;
    for (const b of this.source.bindings.list()) {
      const spec = (b as { spec?: { policyName?: unknown } }).spec;
      if (typeof spec?.policyName === 'string') yield `vap:${spec.policyName}/${b.metadata?.name ?? ''}`;
    }
  }

  /** The names exceptions use for its policies and bindings, once both informers have listed. */
  ruleKeys(): Iterable<string> | undefined {
    return this.source.policies.hasSynced() && this.source.bindings.hasSynced() ? this.#keys() : undefined;
  }

  async evaluate(request: EvaluationInput): Promise<RuleVerdict[]> {
    // No policy and no binding: nothing can apply, and the object need not travel to the
    // evaluation pool a second time (the hand-off is most of the audit's CPU per object, issue 32).
    if (this.source.policies.list().length === 0 && this.source.bindings.list().length === 0) return [];
    const { group, version, kind } = request.kind;
    const known = byKind.get(`${group}/${kind}`);
    const attrs: VapAttributes = {
      operation: 'AUDIT',
      kind: request.kind,
      resource: { group, version, resource: known?.resource ?? guessResource(kind) },
      subResource: '',
      namespace: request.namespace,
      name: request.name,
      namespaced: request.namespace !== '',
      object: request.object,
      oldObject: null,
    };
    const namespaceObject = request.namespace
      ? { apiVersion: 'v1', kind: 'Namespace', metadata: { name: request.namespace, labels: request.namespaceLabels ?? {} } }
      : null;
    const evaluations = await this.run(attrs, namespaceObject);
    const policies = new Map(this.#policies().map((p) => [p.metadata.name, p]));
    if (this.problems) {
      const compile = this.source.compileErrors();
      for (const { policy, problem } of problemsOf(evaluations, (name) => compile.has(name))) this.problems(policies.get(policy), problem, policy);
    }
    return vapVerdicts(evaluations, policies);
  }
}
