/**
 * Pod Security Standards versions, as Pod Security Admission reads them
 * (docs/design.md §10.6): `latest` or `v1.N` (no patch part, no leading zero,
 * major 1). A rule's schema asks for a version with the `minPodSecurityVersion`
 * keyword (compiler.ts); the version in force comes from the namespace label
 * `pod-security.kubernetes.io/enforce-version`, else the rule's
 * `spec.podSecurity.version`, else `latest`.
 *
 * A version is its minor number; `latest` is +Infinity, so it compares newer
 * than every numbered version. Versions above the newest variant a schema
 * names (v1.37 for the shipped library) therefore behave exactly like it and
 * like `latest`, as in PSA where they are clamped to its maxVersion.
 */

/** The namespace label Portal honours, as PSA does for its enforce mode. */
export const POD_SECURITY_VERSION_LABEL = 'pod-security.kubernetes.io/enforce-version';

/** The schema keyword: passes when the version in force is at least its value. */
export const MIN_VERSION_KEYWORD = 'minPodSecurityVersion';

export const LATEST = Number.POSITIVE_INFINITY;

/** PSA's versionRegexp (api/helpers.go): major 1, minor without leading zero. */
export const VERSION_PATTERN = '^v1\\.(0|[1-9][0-9]*)$';
const VERSION = new RegExp(VERSION_PATTERN);

/** `latest` → Infinity, `v1.N` → N, anything else → undefined. */
export function parsePodSecurityVersion(text: string): number | undefined {
  if (text === 'latest') return LATEST;
  if (!VERSION.test(text)) return undefined;
  const minor = Number(text.slice(3));
  // v1.99999999999999999999 is well formed but not a number we can compare.
  return Number.isSafeInteger(minor) ? minor : undefined;
}

/** Why a text is not a version, for error messages. */
export function podSecurityVersionProblem(text: string): string | undefined {
  return parsePodSecurityVersion(text) === undefined ? `"${text}" is not a Pod Security version: use "latest" or "v1.N" (e.g. "v1.30")` : undefined;
}

/** The validation context the compiled schemas read (ajv `passContext`). */
export interface VersionContext {
  readonly podSecurityVersion: number;
}

export interface ResolvedVersion {
  version: number;
  /** Said in violation messages when the version is not the default `latest`; "" otherwise. */
  note: string;
}

/**
 * The version in force for one rule and one namespace. `labels` undefined
 * means the namespace's labels are unknown (the caller decides what that
 * means; the evaluator fails closed).
 */
export function resolvePodSecurityVersion(ruleVersion: string, labels: Readonly<Record<string, string>> | undefined): ResolvedVersion {
  const label = labels?.[POD_SECURITY_VERSION_LABEL];
  if (label !== undefined) {
    const v = parsePodSecurityVersion(label);
    // PSA: an invalid version label becomes latest (and is reported).
    if (v === undefined) return { version: LATEST, note: `namespace label ${POD_SECURITY_VERSION_LABEL}="${label}" is not "latest" or "v1.N", so latest applies` };
    return { version: v, note: label === 'latest' ? '' : `checked at Pod Security Standards ${label}, from namespace label ${POD_SECURITY_VERSION_LABEL}` };
  }
  const v = parsePodSecurityVersion(ruleVersion) ?? LATEST;
  return { version: v, note: ruleVersion === 'latest' ? '' : `checked at Pod Security Standards ${ruleVersion}, from spec.podSecurity.version` };
}

/** True when a schema uses the version keyword anywhere (so its verdict can depend on the version). */
export function usesVersionKeyword(schema: unknown): boolean {
  if (schema === null || typeof schema !== 'object') return false;
  if (Array.isArray(schema)) return schema.some(usesVersionKeyword);
  for (const [k, v] of Object.entries(schema)) {
    if (k === MIN_VERSION_KEYWORD) return true;
    if (usesVersionKeyword(v)) return true;
  }
  return false;
}
