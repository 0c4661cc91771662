/**
 * ValidatingAdmissionPolicies, their bindings and param objects among the
 * documents of a policy directory. Each policy is checked as the API server
 * would check it (validatePolicy, expressions compiled with the CEL engine),
 * each binding likewise; a binding naming a policy that is not in the
 * directory, a paramRef whose policy has no paramKind, or a duplicate name is
 * reported. Objects whose apiVersion/kind is some policy's paramKind are the
 * params. Problems never throw: they come back with their source file.
 */
import {
  celEngine,
  compileErrors,
  compilePolicy,
  formatFieldError,
  validateBinding,
  validatePolicy,
  VAP_BINDING_KIND,
  VAP_GROUP,
  VAP_KIND,
  type ValidatingAdmissionPolicy,
  type ValidatingAdmissionPolicyBinding,
} from '../policy/vap/index.ts';
import type { KubeObject } from '../policy/index.ts';
import type { ManifestDocument, ManifestError } from '../config/manifest-document.ts';

export interface VapDocuments {
  policies: { source: string; policy: ValidatingAdmissionPolicy }[];
  bindings: { source: string; binding: ValidatingAdmissionPolicyBinding }[];
  params: { source: string; object: KubeObject }[];
}

export function isVapDocument(o: Record<string, unknown>): boolean {
  const av = o['apiVersion'];
  return typeof av === 'string' && av.startsWith(`${VAP_GROUP}/`) && (o['kind'] === VAP_KIND || o['kind'] === VAP_BINDING_KIND);
}

const engine = celEngine();

/**
 * The problems of a valid policy's expressions, in the API server's field
 * error form (`spec.validations[0].expression: Invalid value: "...":
 * compilation failed: ERROR: <input>:1:5: ...`): it compiles every
 * expression when a policy is written, and so do we.
 */
export function policyCompileProblems(policy: ValidatingAdmissionPolicy): string[] {
  return compileErrors(compilePolicy(policy, engine)).map((e) => `${e.field}: Invalid value: ${JSON.stringify(e.expression)}: compilation failed: ${e.error}`);
}

function nameOf(o: Record<string, unknown>): string {
  const m = o['metadata'];
  const n = m !== null && typeof m === 'object' ? (m as Record<string, unknown>)['name'] : undefined;
  return typeof n === 'string' ? n : '?';
}

/**
 * Splits VAP documents (policies, bindings) and the remaining candidates
 * (param objects or strangers) and validates them. `rest` are the documents
 * that are neither: those whose kind is a paramKind become params, the others
 * are returned in `unexpected`.
 */
export function loadVapDocuments(docs: readonly ManifestDocument[]): VapDocuments & { errors: ManifestError[]; unexpected: ManifestDocument[] } {
  const errors: ManifestError[] = [];
  const out: VapDocuments = { policies: [], bindings: [], params: [] };
  const rest: ManifestDocument[] = [];
  const seen = new Map<string, string>();
  for (const doc of docs) {
    const o = doc.object;
    if (!isVapDocument(o)) {
      rest.push(doc);
      continue;
    }
    const label = `${String(o['kind'])} "${nameOf(o)}"`;
    const key = `${String(o['kind'])}/${nameOf(o)}`;
    const where = seen.get(key);
    if (where !== undefined) {
      errors.push({ source: doc.source, message: `${label}: duplicate of the one already defined in ${where}; names must be unique` });
      continue;
    }
    seen.set(key, doc.source);
    if (o['kind'] === VAP_KIND) {
      const v = validatePolicy(o);
      const problems = v.ok ? policyCompileProblems(v.value) : v.errors.map(formatFieldError);
      if (!v.ok || problems.length > 0) errors.push({ source: doc.source, message: `${label} is invalid:\n  - ${problems.join('\n  - ')}` });
      else out.policies.push({ source: doc.source, policy: v.value });
    } else {
      const v = validateBinding(o);
      if (!v.ok) errors.push({ source: doc.source, message: `${label} is invalid:\n  - ${v.errors.map(formatFieldError).join('\n  - ')}` });
      else out.bindings.push({ source: doc.source, binding: v.value });
    }
  }
  const policies = new Map(out.policies.map((p) => [p.policy.metadata.name, p.policy]));
  for (const { source, binding } of out.bindings) {
    const p = policies.get(binding.spec.policyName);
    const label = `${VAP_BINDING_KIND} "${binding.metadata.name}"`;
    if (!p) {
      // Not an API server error (the binding would wait for its policy), but offline it is always a mistake.
      errors.push({ source, message: `${label}: spec.policyName "${binding.spec.policyName}" names no ValidatingAdmissionPolicy in the policy directories` });
    } else if (binding.spec.paramRef && !p.spec.paramKind) {
      errors.push({ source, message: `${label}: spec.paramRef is set but ValidatingAdmissionPolicy "${p.metadata.name}" has no spec.paramKind` });
    }
  }
  const paramKinds = new Set(out.policies.flatMap((p) => (p.policy.spec.paramKind ? [`${p.policy.spec.paramKind.apiVersion}/${p.policy.spec.paramKind.kind}`] : [])));
  const unexpected: ManifestDocument[] = [];
  for (const doc of rest) {
    if (paramKinds.has(`${String(doc.object['apiVersion'])}/${String(doc.object['kind'])}`)) out.params.push({ source: doc.source, object: doc.object as KubeObject });
    else unexpected.push(doc);
  }
  return { ...out, errors, unexpected };
}
