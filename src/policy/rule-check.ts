/**
 * A PortalRule's apply-time check (validateRule) as a thread runs it, away
 * from the main thread that answers every other review (issue 31 item 5;
 * src/evaluation/rule-check.ts): the main thread decodes the review and
 * sends its text, with the schemas of the custom kinds the rule matches;
 * the thread reads the object from the text and checks it with the same
 * validateRule and type check as the RuleSet and `portal test`.
 *
 * Why the schemas travel: the type check reads the schemas of the kinds a
 * rule matches (type-check.ts). The built-in catalogue is in every thread;
 * the cluster's CRD schemas live on the main thread (an informer feeds
 * them), so those a rule reads go with it, as JSON text the caller keeps
 * per schema (a string crosses to a thread as one copy, an object graph as
 * one clone per node).
 *
 * Pure: no I/O.
 */
import { BUILTIN_CATALOGUE } from './kind-schemas/builtin.generated.ts';
import { builtinSchemas, layered, staticSource, type KindSchema, type KindSchemaSource } from './kind-schemas/catalogue.ts';
import type { Shape } from './kind-schemas/schema-node.ts';
import { validateRuleKind, type KindValidation } from './portal-kinds.ts';
import { decodeReview } from './review/codec.ts';
import { MAX_CHECKED_KINDS } from './type-check.ts';

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);

/** Distinct strings of an array (anything else in it is the shape check's to refuse). */
function strings(v: unknown): Set<string> | undefined {
  if (!Array.isArray(v)) return undefined;
  const out = new Set<string>();
  for (const s of v) if (typeof s === 'string') out.add(s);
  return out;
}

/**
 * The `group/kind` pairs the type check of `rule` would look up, or none
 * when it looks up none: a `*` kind or group, or more than
 * MAX_CHECKED_KINDS pairs (type-check.ts, rootOf). Read from an object no
 * one has validated yet, so every step is defensive, and the work is
 * linear in the object: each list is read once, and the pairs stop past the
 * bound.
 */
function matchedPairs(rule: unknown): [string, string][] {
  const kinds = isObj(rule) && isObj(rule['spec']) && isObj(rule['spec']['match']) ? rule['spec']['match']['kinds'] : undefined;
  if (!Array.isArray(kinds)) return [];
  const pairs = new Map<string, [string, string]>();
  for (const k of kinds) {
    if (!isObj(k)) continue;
    const groups = strings(k['apiGroups']);
    const names = strings(k['kinds']);
    if (groups === undefined || names === undefined) continue;
    if (groups.has('*') || names.has('*')) return [];
    for (const g of groups) {
      for (const n of names) {
        pairs.set(`${g}/${n}`, [g, n]);
        if (pairs.size > MAX_CHECKED_KINDS) return [];
      }
    }
  }
  return [...pairs.values()];
}

/**
 * The schemas from `source` that the type check of `rule` reads and a
 * thread does not hold (every kind not in the built-in catalogue).
 */
export function schemasToSend(rule: unknown, source: KindSchemaSource): KindSchema[] {
  const out: KindSchema[] = [];
  const builtin = builtinSchemas();
  for (const [group, kind] of matchedPairs(rule)) {
    if (builtin.schemasOf(group, kind) !== undefined) continue;
    for (const s of source.schemasOf(group, kind) ?? []) out.push(s);
  }
  return out;
}

/** A schema as it travels: its components are left out when they are the catalogue's (every CRD schema's, crd-schemas.ts). */
export function kindSchemaText(s: KindSchema): string {
  const { group, version, kind, resource, root, components } = s;
  return JSON.stringify(components === BUILTIN_CATALOGUE.components ? { group, version, kind, resource, root } : s);
}

function kindSchemaOf(text: string): KindSchema {
  const s = JSON.parse(text) as Omit<KindSchema, 'components'> & { components?: KindSchema['components'] };
  return { ...s, components: s.components ?? (BUILTIN_CATALOGUE.components as Record<string, Shape | string>) };
}

/**
 * On the thread: the check of the rule in `review` (an AdmissionReview's
 * text the main thread has decoded already), with the built-in catalogue
 * and the schemas sent along (`schemaTexts`, from kindSchemaText), in the
 * order the main thread's source gave them: the answers are the main
 * thread's own (a built-in kind first, then the cluster's CRDs).
 */
export function checkRuleReview(review: string, schemaTexts: readonly string[]): KindValidation {
  const decoded = decodeReview(JSON.parse(review));
  if (!decoded.ok || decoded.request.object === null) return { ok: false, problems: ['the review holds no object to check'] };
  const sent = schemaTexts.length === 0 ? builtinSchemas() : layered(builtinSchemas(), staticSource(schemaTexts.map(kindSchemaOf)));
  return validateRuleKind(decoded.request.object, sent);
}
