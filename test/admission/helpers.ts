/** Shared fixtures for the admission tests: certificates, a server with a given decider, reviews. */
import { Registry } from 'prom-client';
import { generateCA, generateServingCert, type PemPair } from '../../src/admission/certs.ts';
import { nameOnlyNamespaceLabels, type Decide } from '../../src/admission/decision.ts';
import { ReadinessGate } from '../../src/admission/readiness.ts';
import { buildAdmissionServer, type AdmissionServer, type AdmissionServerOptions, type ConnectionLimits } from '../../src/admission/server.ts';
import { silentLogger } from '../../src/observability/logger.ts';
import { createAdmissionMetrics, type AdmissionMetrics } from '../../src/observability/metrics.ts';

export interface TestPki {
  ca: PemPair;
  serving: PemPair;
}

export async function makePki(): Promise<TestPki> {
  const ca = await generateCA('portal-test-ca');
  return { ca, serving: await generateServingCert(ca, ['localhost'], ['127.0.0.1']) };
}

export interface TestServer {
  app: AdmissionServer;
  registry: Registry;
  gate: ReadinessGate;
  calls: number;
}

export function makeServer(
  pki: TestPki,
  decide: Decide,
  extra: { bodyLimit?: number; metrics?: (m: AdmissionMetrics) => AdmissionMetrics; limits?: Partial<ConnectionLimits>; gate?: ReadinessGate; portalKinds?: AdmissionServerOptions['portalKinds'] } = {},
): TestServer {
  const registry = new Registry();
  const gate = extra.gate ?? new ReadinessGate();
  const t: TestServer = { app: undefined as unknown as AdmissionServer, registry, gate, calls: 0 };
  t.app = buildAdmissionServer({
    tls: { cert: Buffer.from(pki.serving.cert), key: Buffer.from(pki.serving.key) },
    decide: (input) => {
      t.calls++;
      return decide(input);
    },
    gate,
    exemptNamespaces: ['kube-system', 'kube-public', 'kube-node-lease', 'portal-system'],
    namespaceLabels: nameOnlyNamespaceLabels,
    metrics: (extra.metrics ?? ((m) => m))(createAdmissionMetrics(registry)),
    // As if rules named these kinds (src/admission/kind-label.ts).
    kindLabel: (kind) => (kind === 'Pod' || kind === 'Deployment' ? kind : 'other'),
    logger: silentLogger(),
    ...(extra.bodyLimit !== undefined ? { bodyLimit: extra.bodyLimit } : {}),
    ...(extra.limits !== undefined ? { limits: extra.limits } : {}),
    ...(extra.portalKinds !== undefined ? { portalKinds: extra.portalKinds } : {}),
  });
  return t;
}

export function podReview(opts: { uid?: string; apiVersion?: string; namespace?: string; dryRun?: boolean; privileged?: boolean; operation?: string } = {}): Record<string, unknown> {
  const namespace = opts.namespace ?? 'default';
  return {
    apiVersion: opts.apiVersion ?? 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: opts.uid ?? 'uid-1',
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      requestKind: { group: '', version: 'v1', kind: 'Pod' },
      name: 'web',
      namespace,
      operation: opts.operation ?? 'CREATE',
      userInfo: { username: 'alice' },
      dryRun: opts.dryRun ?? false,
      object: {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'web', namespace },
        spec: { containers: [{ name: 'app', image: 'nginx:1.27', securityContext: { privileged: opts.privileged ?? false } }] },
      },
      oldObject: null,
    },
  };
}

export const allowAll: Decide = () => ({ allowed: true, warnings: [] });

/** A tiny real decider: denies privileged containers, like the shipped rule would. */
export const denyPrivileged: Decide = (input) => {
  const spec = (input.object?.spec ?? {}) as { containers?: { securityContext?: { privileged?: boolean } }[] };
  const bad = (spec.containers ?? []).some((c) => c.securityContext?.privileged === true);
  return bad
    ? { allowed: false, code: 403, message: 'denied by disallow-privileged-containers: Privileged containers are not allowed.', warnings: [] }
    : { allowed: true, warnings: [] };
};
