/**
 * Namespace globs of `match.namespaces` / `match.excludedNamespaces`: an exact
 * namespace name, or a prefix followed by a single trailing `*` (`team-*`);
 * `*` alone matches every namespace.
 */

// DNS-1123 label, the syntax of a namespace name (max 63 characters).
const NAMESPACE_NAME = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const NAMESPACE_PREFIX = /^[a-z0-9][-a-z0-9]{0,62}$/;

export function namespaceGlobMatches(glob: string, namespace: string): boolean {
  if (glob.endsWith('*')) return namespace.startsWith(glob.slice(0, -1));
  return glob === namespace;
}

export function anyNamespaceGlobMatches(globs: readonly string[], namespace: string): boolean {
  for (const glob of globs) if (namespaceGlobMatches(glob, namespace)) return true;
  return false;
}

/** A problem with the glob's syntax, or undefined when it is valid. */
export function namespaceGlobProblem(glob: string): string | undefined {
  if (glob === '*') return undefined;
  const star = glob.indexOf('*');
  if (star !== -1 && star !== glob.length - 1) {
    return `"${glob}": only a single trailing * is supported (a prefix glob such as "team-*")`;
  }
  if (star !== -1) {
    return NAMESPACE_PREFIX.test(glob.slice(0, -1))
      ? undefined
      : `"${glob}": the part before * must be the start of a namespace name (lowercase letters, digits and "-")`;
  }
  return NAMESPACE_NAME.test(glob)
    ? undefined
    : `"${glob}": not a valid namespace name (lowercase letters, digits and "-", at most 63, starting and ending alphanumeric)`;
}
