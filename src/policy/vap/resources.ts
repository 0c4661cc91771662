/**
 * The resource (plural) of a kind when there is no discovery to ask
 * (`portal test`): the built-in kinds Portal sees most, then kube's
 * `UnsafeGuessKindToResource` (lower-case; -s → -ses, consonant+y → -ies,
 * else +s), which is what CRDs almost always use.
 */
const KNOWN: Record<string, string> = {
  Endpoints: 'endpoints',
  PodSecurityPolicy: 'podsecuritypolicies',
  NetworkPolicy: 'networkpolicies',
  Ingress: 'ingresses',
  IngressClass: 'ingressclasses',
  StorageClass: 'storageclasses',
  PriorityClass: 'priorityclasses',
  RuntimeClass: 'runtimeclasses',
};

export function guessResource(kind: string): string {
  const known = KNOWN[kind];
  if (known) return known;
  const lower = kind.toLowerCase();
  if (lower.endsWith('s')) return `${lower}es`;
  if (lower.endsWith('y') && !/[aeiou]y$/.test(lower)) return `${lower.slice(0, -1)}ies`;
  return `${lower}s`;
}
