/**
 * A rule whose evaluation allocates far more than a typical one while
 * staying inside its CEL cost: on a Pod with 250,000 args it builds a list
 * of 8-element lists before the per-expression cost limit stops it (about
 * 10 MiB live beside the 10 MiB object). Under a thread heap of
 * HOG_LIMIT_MIB that exhausts the thread; without resourceLimits it ends
 * with CostExceeded. So a test of the memory guard cannot pass without the
 * guard, whatever the schema compiler's own bounds (adr/0018).
 */
export const HOG_EXPRESSION = 'object.spec.containers.all(c, c.args.map(a, [a, a, a, a, a, a, a, a]).size() > 0)';
/** A thread heap that holds the engine, the rules and the object, but not the hog's list besides (measured on the 250,000-arg Pod: 24 and 32 MiB exhaust, 40 does not; 16 cannot start a thread). */
export const HOG_LIMIT_MIB = 32;
export const HOG_ARGS = 250_000;

export function hogRule(namespace: string, name: string, enforcement: 'Audit' | 'Deny' | 'Warn'): Record<string, unknown> {
  return {
    apiVersion: 'portal.dev/v1alpha1',
    kind: 'PortalRule',
    metadata: { name, namespace, generation: 1 },
    spec: { enforcement, match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }] }, validate: { message: 'args', cel: { expressions: [{ expression: HOG_EXPRESSION, message: 'args' }] } } },
  };
}

export function bigPod(namespace: string, name: string, args = HOG_ARGS): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace },
    spec: { containers: [{ name: 'c', image: 'busybox', args: Array.from({ length: args }, (_, i) => String(i % 1000)) }] },
  };
}
