/**
 * ValidatingAdmissionPolicies' type-checking warnings in the audit (issue
 * 33 item 1; src/policy/vap/type-warnings.ts): what the API server writes to
 * a policy's `status.typeChecking.expressionWarnings`, worked out by Portal
 * against the same schemas its own rules are checked against. Portal does
 * not write a VAP's status (the API server owns it), so each warning is a
 * `TypeCheckWarning` Warning Event on the policy (one per field and policy
 * generation, written by the leader: ProblemEvents) and an entry of
 * /debug/vars `validating_admission_policies.typeWarnings`.
 *
 * Computed on every replica when a policy is added or changed, never per
 * request.
 */
import type { InformerEvent } from '../kube/informer.ts';
import type { KindSchemaSource } from '../policy/kind-schemas/catalogue.ts';
import type { KubeObject } from '../policy/types.ts';
import { vapTypeWarnings, type ExpressionWarning } from '../policy/vap/type-warnings.ts';
import type { ValidatingAdmissionPolicy } from '../policy/vap/types.ts';
import type { ProblemEvents } from './problem-events.ts';

export class VapTypeWarnings {
  readonly #schemas: KindSchemaSource;
  readonly #events: ProblemEvents;
  readonly #warnings = new Map<string, ExpressionWarning[]>();

  constructor(deps: { schemas: KindSchemaSource; events: ProblemEvents }) {
    this.#schemas = deps.schemas;
    this.#events = deps.events;
  }

  /** The policies informer's handler. */
  observe(e: InformerEvent<KubeObject>): void {
    const policy = e.object as unknown as ValidatingAdmissionPolicy;
    const name = policy.metadata?.name ?? '';
    if (e.type === 'delete') {
      this.#warnings.delete(name);
      return;
    }
    let warnings: ExpressionWarning[];
    try {
      warnings = vapTypeWarnings(policy, this.#schemas);
    } catch {
      // A malformed policy is the compile path's to report.
      return;
    }
    if (warnings.length === 0) {
      this.#warnings.delete(name);
      return;
    }
    this.#warnings.set(name, warnings);
    if (!policy.metadata.uid) return;
    const subject = { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingAdmissionPolicy', name, uid: policy.metadata.uid, generation: policy.metadata.generation ?? 0 };
    for (const w of warnings) {
      this.#events.note(subject, { reason: 'TypeCheckWarning', discriminator: [w.fieldRef], message: `ValidatingAdmissionPolicy ${name}, ${w.fieldRef}: ${w.warning}` });
    }
  }

  /** `{policy: [{fieldRef, warning}]}` for /debug/vars. */
  debugVars(): Record<string, ExpressionWarning[]> {
    return Object.fromEntries(this.#warnings);
  }
}
