/**
 * Validation of a PortalException (exceptions.ts): its structure against the
 * CRD schema, its names, globs and selectors, its CEL matchConditions, and
 * `--max-exception-lifetime`, with messages that say how to fix each
 * problem. Pure: time comes in as `now`.
 */
import { Ajv } from 'ajv';
import type { ErrorObject } from 'ajv';
import { formatDuration } from '../util/duration.ts';
import { compileComposition, type Composition } from './cel/index.ts';
import { EXCEPTION_CRD_OPENAPI_SCHEMA } from './exception-crd-schema.generated.ts';
import { toViolations } from './schema-errors.ts';
import { EXCEPTION_KIND, RULE_API_VERSION, type PortalExceptionObject } from './types.ts';
import { closeObjects, matchProblems, nameProblem } from './validate-rule.ts';
import { namespaceGlobMatches } from './namespace-glob.ts';

export type ExceptionValidation = { ok: true; exception: PortalExceptionObject } | { ok: false; problems: string[] };

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|([+-])(\d{2}):(\d{2}))$/;

/** Milliseconds since the epoch of an RFC 3339 date-time (as Go's time.RFC3339 parses it), or undefined. */
export function parseRfc3339(s: string): number | undefined {
  const m = RFC3339.exec(s);
  if (!m) return undefined;
  const [y, mo, d, h, mi, se] = [1, 2, 3, 4, 5, 6].map((i) => Number(m[i]));
  if (mo === undefined || d === undefined || h === undefined || mi === undefined || se === undefined || y === undefined) return undefined;
  if (mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || se > 59) return undefined;
  const base = Date.UTC(y, mo - 1, d, h, mi, se);
  // Date.UTC rolls 30 February over into March: reject what does not round-trip.
  if (new Date(base).getUTCDate() !== d) return undefined;
  const fraction = m[7] ? Math.floor(Number(`0${m[7]}`) * 1000) : 0;
  let offset = 0;
  if (m[9]) {
    const oh = Number(m[10]);
    const om = Number(m[11]);
    if (oh > 23 || om > 59) return undefined;
    offset = (m[9] === '-' ? -1 : 1) * (oh * 60 + om) * 60_000;
  }
  return base + fraction - offset;
}

// ---- validation -----------------------------------------------------------------

const crdAjv = new Ajv({ strict: false, allErrors: true, validateFormats: false, logger: false });
const crdSchema = closeObjects(EXCEPTION_CRD_OPENAPI_SCHEMA) as Record<string, unknown>;
// metadata is validated by hand (the API server owns ObjectMeta).
(crdSchema['properties'] as Record<string, unknown>)['metadata'] = { type: 'object' };
const validateCrd = crdAjv.compile(crdSchema);

/** A rule reference: a DNS subdomain, or two of them joined by "/". */
const RULE_NAME = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?(\/[a-z0-9]([-a-z0-9.]*[a-z0-9])?)?$/;
/** An object name glob: a name, or a prefix and one trailing `*`. */
const NAME_GLOB = /^([a-z0-9]([-a-z0-9.]*[a-z0-9])?|[a-z0-9][-a-z0-9.]*\*|\*)$/;

export function compileConditions(spec: PortalExceptionObject['spec']): { ok: true; conditions: Composition | undefined } | { ok: false; problems: string[] } {
  const mcs = spec.matchConditions ?? [];
  if (mcs.length === 0) return { ok: true, conditions: undefined };
  const c = compileComposition({ matchConditions: mcs, validations: [] });
  if (!c.ok) return { ok: false, problems: c.errors.map((e) => `spec.${e.field} (line ${e.position.line}, column ${e.position.column}): ${e.message}`) };
  return { ok: true, conditions: c };
}

function semanticProblems(o: PortalExceptionObject): string[] {
  const problems: string[] = [];
  const spec = o.spec;
  const m = spec.match;
  spec.rules.forEach((r, i) => {
    if (!RULE_NAME.test(r)) problems.push(`spec.rules[${i}]: "${r}" is not a rule name: write NAME (a PortalClusterRule, a PortalRule in this namespace, a ValidatingAdmissionPolicy) or NAMESPACE/NAME (a PortalRule, or POLICY/BINDING)`);
  });
  (m.names ?? []).forEach((n, i) => {
    if (!NAME_GLOB.test(n)) problems.push(`spec.match.names[${i}]: "${n}" is not a name or a prefix glob (lowercase letters, digits, "-" and ".", one trailing * at most)`);
  });
  problems.push(...matchProblems(m));
  if (spec.reason.trim() === '') problems.push('spec.reason: say why the exemption is needed (e.g. a ticket); it must not be blank');
  if (spec.expiresAt !== undefined && parseRfc3339(spec.expiresAt) === undefined) {
    problems.push(`spec.expiresAt: "${spec.expiresAt}" is not an RFC 3339 date-time; write it like 2026-12-31T00:00:00Z`);
  }
  const seen = new Set<string>();
  (spec.matchConditions ?? []).forEach((c, i) => {
    if (seen.has(c.name)) problems.push(`spec.matchConditions[${i}].name: "${c.name}" is used twice; names must be unique`);
    seen.add(c.name);
  });
  return problems;
}

/**
 * Namespace criteria an exception can never meet: one outside the
 * `privileged` namespaces (`--exception-namespaces`) exempts only objects of
 * its own namespace, so a `match.namespaces` entry that does not match that
 * namespace (an exception in team-a naming `default`), or a
 * `match.excludedNamespaces` entry that does, only pretends to exempt. Such
 * an exception is refused at apply and held invalid (it exempts nothing), so
 * its status says why instead of showing it Active.
 */
export function reachProblems(ex: PortalExceptionObject, privileged: ReadonlySet<string>): string[] {
  const namespace = ex.metadata.namespace ?? '';
  if (privileged.has(namespace)) return [];
  const problems: string[] = [];
  const only = `an exception in namespace ${namespace} exempts only objects in ${namespace} (only exceptions in --exception-namespaces may name other namespaces)`;
  (ex.spec.match.namespaces ?? []).forEach((g, i) => {
    if (!namespaceGlobMatches(g, namespace)) problems.push(`spec.match.namespaces[${i}]: "${g}" is out of reach: ${only}; remove it`);
  });
  (ex.spec.match.excludedNamespaces ?? []).forEach((g, i) => {
    if (namespaceGlobMatches(g, namespace)) problems.push(`spec.match.excludedNamespaces[${i}]: "${g}" excludes ${namespace}, the one namespace this exception may exempt in, so it would exempt nothing; remove it`);
  });
  return problems;
}

/**
 * Structure and semantics, CEL compiled; not the lifetime (see
 * {@link lifetimeProblem}). With `privileged` (the `--exception-namespaces`),
 * also the namespace criteria out of its reach ({@link reachProblems}).
 */
export function exceptionShapeProblems(obj: unknown, privileged?: ReadonlySet<string>): string[] {
  if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) return ['a PortalException must be an object with apiVersion, kind, metadata and spec'];
  const o = obj as Record<string, unknown>;
  const problems: string[] = [];
  if (o['apiVersion'] !== RULE_API_VERSION) problems.push(`apiVersion: must be "${RULE_API_VERSION}" (got ${JSON.stringify(o['apiVersion'] ?? null)})`);
  if (o['kind'] !== EXCEPTION_KIND) problems.push(`kind: must be ${EXCEPTION_KIND} (got ${JSON.stringify(o['kind'] ?? null)})`);
  const meta = o['metadata'];
  if (meta === null || typeof meta !== 'object' || Array.isArray(meta)) problems.push('metadata: must be an object with a name and a namespace');
  else {
    const md = meta as Record<string, unknown>;
    const np = nameProblem(md['name'], 'metadata.name');
    if (np) problems.push(np);
    const nsp = nameProblem(md['namespace'], 'metadata.namespace');
    if (nsp) problems.push(`${nsp} (a PortalException is namespaced: it exempts objects in its own namespace)`);
  }
  const structural = validateCrd(obj)
    ? []
    : toViolations((validateCrd.errors ?? []) as ErrorObject[]).map((v) =>
        v.message === 'is not allowed' ? `${v.path}: unknown field; check its spelling against the PortalException API` : `${v.path}: ${v.message}`,
      );
  problems.push(...structural);
  if (structural.length === 0 && problems.length === 0) {
    const ex = obj as PortalExceptionObject;
    problems.push(...semanticProblems(ex));
    if (privileged) problems.push(...reachProblems(ex, privileged));
    const c = compileConditions(ex.spec);
    if (!c.ok) problems.push(...c.problems);
  }
  return problems;
}

/** Go-style duration for messages (`720h`, `1h30m`, `90s`): whole seconds. */
function duration(ms: number): string {
  return formatDuration(Math.round(ms / 1000) * 1000);
}

/**
 * Why `--max-exception-lifetime` refuses the exception, or undefined. The
 * lifetime runs from creation (the moment judged when it has no
 * creationTimestamp yet: at apply, in files), or from now when the
 * creationTimestamp lies in the future: a forged or skewed timestamp must not
 * buy an exemption longer than the cap from the moment it is judged.
 */
export function lifetimeProblem(
  ex: { expiresAt: number | undefined; createdAt: number | undefined },
  maxLifetimeMs: number | undefined,
  now: number,
): string | undefined {
  if (maxLifetimeMs === undefined) return undefined;
  if (ex.expiresAt === undefined) return `it never expires, and --max-exception-lifetime is ${duration(maxLifetimeMs)}: set spec.expiresAt`;
  const from = Math.min(ex.createdAt ?? now, now);
  const lifetime = ex.expiresAt - from;
  if (lifetime > maxLifetimeMs) {
    return `it expires ${duration(lifetime)} after its creation, more than --max-exception-lifetime (${duration(maxLifetimeMs)}): set spec.expiresAt to ${new Date(from + maxLifetimeMs).toISOString()} or earlier`;
  }
  return undefined;
}

/**
 * Everything a PortalException must satisfy to be in force, as the
 * apply-time webhook and `portal test` check it: shape, CEL, (with
 * `exceptionNamespaces`) its namespace reach, and (with `maxLifetimeMs`) the
 * lifetime at `now`.
 */
export function validateExceptionShape(obj: unknown, opts: { maxLifetimeMs?: number | undefined; exceptionNamespaces?: readonly string[] | undefined; now?: number } = {}): ExceptionValidation {
  const problems = exceptionShapeProblems(obj, opts.exceptionNamespaces ? new Set(opts.exceptionNamespaces) : undefined);
  if (problems.length > 0) return { ok: false, problems };
  const ex = obj as PortalExceptionObject;
  const lifetime = lifetimeProblem(
    { expiresAt: ex.spec.expiresAt !== undefined ? parseRfc3339(ex.spec.expiresAt) : undefined, createdAt: createdAt(ex) },
    opts.maxLifetimeMs,
    opts.now ?? Date.now(),
  );
  if (lifetime) return { ok: false, problems: [`spec.expiresAt: ${lifetime}`] };
  return { ok: true, exception: ex };
}

export function createdAt(ex: PortalExceptionObject): number | undefined {
  const ts = ex.metadata.creationTimestamp;
  return typeof ts === 'string' ? parseRfc3339(ts) : undefined;
}

