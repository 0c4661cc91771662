/**
 * The large rule of the rule-churn cases (issue 31 item 5): a 62 KB
 * PortalRule within every bound (1,050 annotations, each a bounded string),
 * which takes ~0.15–1.5 s to compile on the 2-vCPU VM. The salt is in each
 * key, so every rule's schema is different (no cache can share them); a
 * longer salt would pass the 64 KiB bound.
 */
export function bigSchema(salt: string): Record<string, unknown> {
  const annotations: Record<string, unknown> = {};
  for (let i = 0; i < 1_050; i++) annotations[`example.com/${salt}-key-${i}`] = { type: 'string', maxLength: 63 + (i % 7) };
  return { properties: { metadata: { properties: { annotations: { properties: annotations } } } } };
}

/** A Deny PortalRule on Pods in `namespace` with `schema`. */
export function podRule(name: string, namespace: string, schema: Record<string, unknown>): Record<string, unknown> {
  return {
    apiVersion: 'portal.dev/v1alpha1',
    kind: 'PortalRule',
    metadata: { name, namespace },
    spec: { enforcement: 'Deny', match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }] }, validate: { message: 'annotations must be short', schema } },
  };
}

/** {@link podRule} with {@link bigSchema}. */
export function bigRule(name: string, namespace: string, salt: string): Record<string, unknown> {
  return podRule(name, namespace, bigSchema(salt));
}
