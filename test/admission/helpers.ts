/**
 * Shared fixtures for the admission tests: certificates, a server that
 * decides as `portal serve` does (the real evaluation pool, its worker
 * threads in this process, holding the test's RuleSet), reviews.
 */
import pino from 'pino';
import { Registry } from 'prom-client';
import { generateCA, generateServingCert, type PemPair } from '../../src/admission/certs.ts';
import type { AnswerReview } from '../../src/admission/decision.ts';
import { ReadinessGate } from '../../src/admission/readiness.ts';
import type { ConnectionLimits } from '../../src/admission/limits.ts';
import { buildAdmissionServer, type AdmissionServer, type AdmissionServerOptions } from '../../src/admission/server.ts';
import { EvaluationPool } from '../../src/evaluation/pool.ts';
import { exemptNamespaces } from '../../src/policy/review/answer.ts';
import { silentLogger } from '../../src/observability/logger.ts';
import { createAdmissionMetrics, type AdmissionMetrics } from '../../src/observability/metrics.ts';
import type { EvaluationPoolDeps } from '../../src/evaluation/pool-config.ts';
import { RuleSet } from '../../src/policy/index.ts';
import { clusterRule } from '../policy/support.ts';

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
  /** The evaluation pool the server sends reviews to; closed with the app. */
  pool: EvaluationPool;
  /** Reviews sent to the pool. */
  calls: number;
}

/** As `portal serve` is configured (config/defaults), the install namespace included. */
export const EXEMPT_NAMESPACES = exemptNamespaces(['kube-system', 'kube-public', 'kube-node-lease', 'portal-system']);

export interface TestServerExtra {
  bodyLimit?: number;
  metrics?: (m: AdmissionMetrics) => AdmissionMetrics;
  limits?: Partial<ConnectionLimits>;
  gate?: ReadinessGate;
  portalKinds?: AdmissionServerOptions['portalKinds'];
  /** The pool's evaluation deadline, ms. @default 10 000 */
  evaluationTimeoutMs?: number;
  /** Sees each rule's `error` verdict, as the replica's rule-problem reporter does. */
  onRuleError?: EvaluationPoolDeps['onRuleError'];
  /**
   * Stands between the server and the pool, as a pool in trouble would: it
   * may hold a review (a slow worker), or reject it (a closed pool, a worker
   * that died) instead of passing it on to `review`.
   */
  through?: (body: string, review: AnswerReview) => Promise<Awaited<ReturnType<AnswerReview>>>;
}

/** A server over the real evaluation pool holding `rules`: the path production takes (manager/replica.ts). */
export function makeServer(pki: TestPki, rules: RuleSet, extra: TestServerExtra = {}): TestServer {
  const registry = new Registry();
  const gate = extra.gate ?? new ReadinessGate();
  const pool = new EvaluationPool(
    { name: 'admission', workers: 1, timeoutMs: extra.evaluationTimeoutMs ?? 10_000, exempt: EXEMPT_NAMESPACES },
    { rules },
    { logger: pino({ level: 'silent' }), ...(extra.onRuleError !== undefined ? { onRuleError: extra.onRuleError } : {}) },
  );
  const review: AnswerReview = (body) => pool.review(body);
  const t: TestServer = { app: undefined as unknown as AdmissionServer, registry, gate, pool, calls: 0 };
  t.app = buildAdmissionServer({
    tls: { cert: Buffer.from(pki.serving.cert), key: Buffer.from(pki.serving.key) },
    answerReview: (body) => {
      t.calls++;
      return extra.through ? extra.through(body, review) : review(body);
    },
    gate,
    exempt: EXEMPT_NAMESPACES,
    metrics: (extra.metrics ?? ((m) => m))(createAdmissionMetrics(registry)),
    // As if rules named these kinds (src/admission/kind-label.ts).
    kindLabel: (kind) => (kind === 'Pod' || kind === 'Deployment' ? kind : 'other'),
    logger: silentLogger(),
    ...(extra.bodyLimit !== undefined ? { bodyLimit: extra.bodyLimit } : {}),
    ...(extra.limits !== undefined ? { limits: extra.limits } : {}),
    ...(extra.portalKinds !== undefined ? { portalKinds: extra.portalKinds } : {}),
  });
  t.app.addHook('onClose', () => pool.close());
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

/** No rules: every review is allowed. */
export function allowAll(): RuleSet {
  return new RuleSet();
}

/** The shipped rule's shape: denies privileged containers (test/policy/support.ts). */
export function denyPrivileged(): RuleSet {
  const rules = new RuleSet();
  rules.upsert(clusterRule('disallow-privileged-containers'));
  return rules;
}

/** A rule every Pod fails: a review it is not applied to was not evaluated. */
export function denyEveryPod(): RuleSet {
  const rules = new RuleSet();
  rules.upsert(clusterRule('deny-every-pod', { validate: { message: 'must not be evaluated', schema: { required: ['never-present'] } } }));
  return rules;
}
