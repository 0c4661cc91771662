/**
 * Rules from files: a policy directory (or file) read with the manifest
 * reader (config/manifests.ts) under the rule files' size limits, each
 * document checked as the API server and Portal's own webhook would check
 * it. `portal serve --policies DIR` (file-rule-source.ts) and `portal test`
 * read rules this one way.
 */
import { exceptionKey, ruleKey, validateExceptionShape, validateRule, type PortalExceptionObject, type PortalRuleObject } from '../policy/index.ts';
import { readManifests, type ReadLimits } from '../config/manifests.ts';
import type { ManifestDocument, ManifestError } from '../config/manifest-document.ts';
import { isObject } from '../util/is-object.ts';
import { loadVapDocuments, type VapDocuments } from './vap-files.ts';

/**
 * Rule files are held to much less, checked on the file sizes before
 * anything is read or parsed (YAML parsing costs ~100x the text in memory:
 * a 10 MB rule file took over 1 GB before the rules were rejected):
 * - 1 MiB per file: a rule's schema is at most 64 KiB serialized
 *   (MAX_SCHEMA_BYTES), so a file holds a dozen of the largest rules; the
 *   whole Pod Security library is 72 KB in 15 files;
 * - 16 MiB per rule directory: ~250 of the largest rules, far beyond a real
 *   policy set, and at ~100x still inside a 2 GiB heap.
 * Every rule is compiled and evaluated on each replica, inside the 30 s a
 * webhook may take at most, so a rule set this large is a mistake to report,
 * not a load to carry.
 */
export const RULE_FILE_LIMITS: Readonly<ReadLimits> = Object.freeze({
  maxFileBytes: 1024 * 1024,
  maxTotalBytes: 16 * 1024 * 1024,
  what: 'rule file',
});

/** How a message names a document: its kind and name, or its position in the file. */
function documentLabel(doc: ManifestDocument): string {
  const name = isObject(doc.object['metadata']) ? doc.object['metadata']['name'] : undefined;
  return `${String(doc.object['kind'] ?? 'object')} ${typeof name === 'string' ? `"${name}"` : `#${doc.index + 1}`}`;
}

/** Namespace of a namespaced manifest without one, as `kubectl apply` would create it. */
const DEFAULT_NAMESPACE = 'default';

/**
 * Rules from a directory (or file): every document must be a valid
 * PortalRule / PortalClusterRule (validateRule, schema compiled), a valid
 * PortalException (in "default" when it names no namespace), a valid
 * ValidatingAdmissionPolicy or binding, or a param object of some policy's
 * paramKind; rule and exception keys must be unique. Invalid documents are
 * reported, not returned.
 */
export async function loadRulesFromDirectory(dir: string): Promise<{ rules: PortalRuleObject[]; exceptions: PortalExceptionObject[]; errors: ManifestError[]; vap: VapDocuments }> {
  const read = await readManifests([dir], RULE_FILE_LIMITS);
  const errors = [...read.errors];
  const rules: PortalRuleObject[] = [];
  const exceptions: PortalExceptionObject[] = [];
  const seen = new Map<string, string>();
  const others: ManifestDocument[] = [];
  /** Keeps a valid object whose key is new; reports an invalid or a duplicate one (`unique`: the rule its key breaks). */
  const accept = <T>(doc: ManifestDocument, checked: { ok: true; value: T } | { ok: false; problems: string[] }, key: (v: T) => string, what: string, unique: string, into: T[]): void => {
    const label = documentLabel(doc);
    if (!checked.ok) {
      errors.push({ source: doc.source, message: `${label} is invalid:\n  - ${checked.problems.join('\n  - ')}` });
      return;
    }
    const k = key(checked.value);
    const where = seen.get(k);
    if (where !== undefined) {
      errors.push({ source: doc.source, message: `${label}: duplicate of the ${what} already defined in ${where}; ${unique}` });
      return;
    }
    seen.set(k, doc.source);
    into.push(checked.value);
  };
  for (const doc of read.documents) {
    const kind = doc.object['kind'];
    if (kind === 'PortalException') {
      const meta = isObject(doc.object['metadata']) ? doc.object['metadata'] : {};
      const object = { ...doc.object, metadata: { ...meta, namespace: typeof meta['namespace'] === 'string' && meta['namespace'] !== '' ? meta['namespace'] : DEFAULT_NAMESPACE } };
      // The lifetime is judged where the exception is used (it depends on --max-exception-lifetime and the time).
      const checked = validateExceptionShape(object);
      accept(doc, checked.ok ? { ok: true, value: checked.exception } : checked, exceptionKey, 'exception', 'names must be unique in a namespace', exceptions);
    } else if (kind === 'PortalRule' || kind === 'PortalClusterRule') {
      const checked = validateRule(doc.object);
      accept(doc, checked.ok ? { ok: true, value: checked.rule } : checked, ruleKey, 'rule', 'rule names must be unique', rules);
    } else others.push(doc);
  }
  const vap = loadVapDocuments(others);
  errors.push(...vap.errors);
  for (const doc of vap.unexpected) {
    errors.push({
      source: doc.source,
      message: `${documentLabel(doc)}: unexpected kind; a policy directory holds PortalRule, PortalClusterRule, PortalException, ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding objects, and the param objects of a policy's paramKind`,
    });
  }
  // Files were read in order: report problems in file order too (the sort is stable).
  errors.sort((a, b) => (a.source < b.source ? -1 : a.source > b.source ? 1 : 0));
  return { rules, exceptions, errors, vap: { policies: vap.policies, bindings: vap.bindings, params: vap.params } };
}
