/**
 * Validation of PortalRule / PortalClusterRule objects: the CRD's structural
 * schema (the same one the API server enforces, from crd-schema.generated.ts)
 * plus the semantic checks a schema cannot express. Every problem is reported
 * at once, each saying what to change.
 */
import { Ajv } from 'ajv';
import type { ErrorObject } from 'ajv';
import { celSizeProblem, compileCelRule } from './cel-rule.ts';
import { SchemaCompiler, schemaGuardProblem } from './compiler.ts';
import { RULE_CRD_OPENAPI_SCHEMA } from './crd-schema.generated.ts';
import { labelKeyProblem, labelValueProblem, selectorProblems } from './label-selector.ts';
import { namespaceGlobProblem } from './namespace-glob.ts';
import { podSecurityVersionProblem } from './pod-security-version.ts';
import { builtinSchemas, type KindSchemaSource } from './kind-schemas/catalogue.ts';
import { toViolations } from './schema-errors.ts';
import { refusesAtApply, typeCheckRule } from './type-check.ts';
import { RULE_API_VERSION, type KindMatch, type LabelSelector, type PortalRuleObject, type RuleSpec } from './types.ts';

export type RuleValidation =
  /** `warnings`: what an Audit rule's type check found (it is not refused for them). */
  | { ok: true; rule: PortalRuleObject; warnings?: string[] }
  | { ok: false; problems: string[] };

/**
 * The CRD schema with `additionalProperties: false` on every described object,
 * so a misspelt field (`enforcment`) is reported instead of silently pruned as
 * the API server would do.
 */
export function closeObjects(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(closeObjects);
  if (schema === null || typeof schema !== 'object') return schema;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(schema)) {
    out[k] = k === 'properties' ? Object.fromEntries(Object.entries(v as object).map(([p, s]) => [p, closeObjects(s)])) : closeObjects(v);
  }
  if (out['properties'] && out['x-kubernetes-preserve-unknown-fields'] !== true && out['additionalProperties'] === undefined) {
    out['additionalProperties'] = false;
  }
  return out;
}

const crdAjv = new Ajv({ strict: false, allErrors: true, validateFormats: false, logger: false });
const crdSchema = closeObjects(RULE_CRD_OPENAPI_SCHEMA) as Record<string, unknown>;
// metadata is validated by hand below (the API server owns ObjectMeta).
(crdSchema['properties'] as Record<string, unknown>)['metadata'] = { type: 'object' };
const validateCrd = crdAjv.compile(crdSchema);

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const WORKLOAD_HINT = 'list {apiGroups: [""], kinds: ["Pod"]} in match.kinds';

export function nameProblem(name: unknown, what: string): string | undefined {
  if (typeof name !== 'string' || name === '') return `${what} is required`;
  if (name.length > 253 || !DNS_SUBDOMAIN.test(name)) {
    return `${what} "${name}" is not a valid name: use lowercase letters, digits, "-" and ".", at most 253 characters`;
  }
  return undefined;
}

/** True when some KindMatch of the rule can select core Pods. */
export function matchesPods(spec: RuleSpec): boolean {
  return spec.match.kinds.some(
    (k) => (k.apiGroups.includes('') || k.apiGroups.includes('*')) && (k.kinds.includes('Pod') || k.kinds.includes('*')),
  );
}

/** What a rule's and an exception's `spec.match` share: namespace globs, selectors, kinds. */
export function matchProblems(m: {
  namespaces?: readonly string[] | undefined;
  excludedNamespaces?: readonly string[] | undefined;
  namespaceSelector?: LabelSelector | undefined;
  objectSelector?: LabelSelector | undefined;
  kinds: readonly KindMatch[];
}): string[] {
  const problems: string[] = [];
  for (const field of ['namespaces', 'excludedNamespaces'] as const) {
    (m[field] ?? []).forEach((glob, i) => {
      const p = namespaceGlobProblem(glob);
      if (p) problems.push(`spec.match.${field}[${i}]: ${p}`);
    });
  }
  if (m.namespaceSelector) problems.push(...selectorProblems(m.namespaceSelector, 'spec.match.namespaceSelector'));
  if (m.objectSelector) problems.push(...selectorProblems(m.objectSelector, 'spec.match.objectSelector'));
  m.kinds.forEach((k, i) => {
    if (k.apiGroups.includes('*') && k.apiGroups.length > 1) {
      problems.push(`spec.match.kinds[${i}].apiGroups: "*" already means every group; remove the other entries`);
    }
  });
  return problems;
}

function semanticProblems(spec: RuleSpec): string[] {
  const problems = matchProblems(spec.match);
  const version = spec.podSecurity?.version;
  if (version !== undefined) {
    const p = podSecurityVersionProblem(version);
    if (p) problems.push(`spec.podSecurity.version: ${p}`);
  }
  if (spec.validate.schema !== undefined) {
    const guard = schemaGuardProblem(spec.validate.schema);
    if (guard) problems.push(`spec.${guard}`);
  }
  // Before anything compiles: a rule's CEL is bounded in total, not only per expression.
  if (spec.validate.cel !== undefined) {
    const tooLarge = celSizeProblem(spec.validate.cel);
    if (tooLarge) problems.push(tooLarge);
  }
  const seen = new Set<string>();
  (spec.validate.cel?.variables ?? []).forEach((v, i) => {
    if (seen.has(v.name)) problems.push(`spec.validate.cel.variables[${i}].name: "${v.name}" is declared twice; variable names must be unique`);
    seen.add(v.name);
  });
  (spec.audit?.actions ?? []).forEach((a, i) => {
    const at = `spec.audit.actions[${i}]`;
    if (a.type === 'label' || a.type === 'annotate') {
      if (a.key === undefined || a.key === '') problems.push(`${at}: the ${a.type} action needs a key`);
      else {
        const p = labelKeyProblem(a.key);
        if (p) problems.push(`${at}.key: ${p.replace('label key', `${a.type} key`)}`);
      }
      if (a.value === undefined) problems.push(`${at}: the ${a.type} action needs a value (it may be "")`);
      else if (a.type === 'label') {
        const p = labelValueProblem(a.value);
        if (p) problems.push(`${at}.value: ${p}`);
      }
    } else if (a.key !== undefined || a.value !== undefined) {
      problems.push(`${at}: the ${a.type} action takes no key or value; remove them`);
    }
    if (a.type === 'evict' && !matchesPods(spec)) {
      problems.push(`${at}: evict only applies to Pods but the rule does not match Pods; ${WORKLOAD_HINT} or use another action`);
    }
  });
  return problems;
}

function crdProblems(obj: unknown): string[] {
  if (validateCrd(obj)) return [];
  return toViolations((validateCrd.errors ?? []) as ErrorObject[]).map((v) => {
    if (v.message === 'is not allowed') return `${v.path}: unknown field; check its spelling against the PortalRule API`;
    const version = (obj as { spec?: { podSecurity?: { version?: unknown } } }).spec?.podSecurity?.version;
    // The CRD's pattern, said the way a user can act on.
    if (v.path === 'spec.podSecurity.version' && typeof version === 'string') return `${v.path}: ${podSecurityVersionProblem(version) ?? v.message}`;
    return `${v.path}: ${v.message}`;
  });
}

/**
 * Structure and semantics, without compiling the schema: what RuleSet uses
 * (it compiles itself and keeps the last good version on failure).
 */
export function validateRuleShape(obj: unknown): RuleValidation {
  if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) {
    return { ok: false, problems: ['a rule must be an object with apiVersion, kind, metadata and spec'] };
  }
  const o = obj as Record<string, unknown>;
  const problems: string[] = [];
  if (o['apiVersion'] !== RULE_API_VERSION) {
    problems.push(`apiVersion: must be "${RULE_API_VERSION}" (got ${JSON.stringify(o['apiVersion'] ?? null)})`);
  }
  if (o['kind'] !== 'PortalRule' && o['kind'] !== 'PortalClusterRule') {
    problems.push(`kind: must be PortalRule or PortalClusterRule (got ${JSON.stringify(o['kind'] ?? null)})`);
  }
  const meta = o['metadata'];
  if (meta === null || typeof meta !== 'object' || Array.isArray(meta)) {
    problems.push('metadata: must be an object with a name');
  } else {
    const md = meta as Record<string, unknown>;
    const np = nameProblem(md['name'], 'metadata.name');
    if (np) problems.push(np);
    if (o['kind'] === 'PortalRule') {
      const nsp = nameProblem(md['namespace'], 'metadata.namespace');
      if (nsp) problems.push(`${nsp} (a PortalRule is namespaced: set the namespace it applies to, or use a PortalClusterRule)`);
    }
  }
  const structural = crdProblems(obj);
  problems.push(...structural);
  // The CRD cannot say "schema or cel" (structural schemas have no anyOf of required), so it is checked here.
  const validate = (o['spec'] as { validate?: unknown } | undefined)?.validate;
  if (validate !== null && typeof validate === 'object' && !('schema' in validate) && !('cel' in validate)) {
    problems.push('spec.validate: give a schema, a cel block or both');
  }
  // Semantic checks need a structurally valid spec to read.
  if (structural.length === 0 && problems.length === 0) {
    problems.push(...semanticProblems((o as unknown as PortalRuleObject).spec));
  }
  return problems.length ? { ok: false, problems } : { ok: true, rule: obj as PortalRuleObject };
}

/**
 * The compiler validateRule checks schemas on (compile, then release: each
 * schema gets its own ajv instance, dropped with the release). It never
 * evaluates anything, so no evaluation state (deadline, cost) lives in it;
 * the rules in force are compiled by their RuleSet's own compiler.
 */
const checker = new SchemaCompiler();

/**
 * Everything, including compiling `validate.schema` and `validate.cel` and
 * type-checking them against the matched kinds' schemas (type-check.ts): the
 * full answer for the rules webhook, `portal test` and `--policies`.
 * `schemas`: the built-in catalogue unless the caller knows more (a replica
 * adds the cluster's CRDs).
 */
export function validateRule(obj: unknown, schemas: KindSchemaSource = builtinSchemas()): RuleValidation {
  const shape = validateRuleShape(obj);
  if (!shape.ok) return shape;
  const problems: string[] = [];
  const { schema, cel } = shape.rule.spec.validate;
  if (schema !== undefined) {
    const compiled = checker.compile(schema);
    if (!compiled.ok) problems.push(`spec.${compiled.error}`);
    else compiled.release();
  }
  if (cel !== undefined) {
    const compiled = compileCelRule(cel);
    if (!compiled.ok) problems.push(...compiled.errors);
  }
  if (problems.length) return { ok: false, problems };
  // Only a rule that compiles is type-checked (its expressions parse).
  const checked = typeCheckRule(shape.rule.spec, schemas);
  if (checked.state === 'checked' && checked.problems.length > 0) {
    return refusesAtApply(shape.rule.spec) ? { ok: false, problems: checked.problems } : { ...shape, warnings: checked.problems };
  }
  return shape;
}
