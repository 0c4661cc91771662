/**
 * Kubernetes client construction (client-node 1.4.0) and small typed helpers
 * shared by everything that talks to the API server.
 */
import {
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  Observable,
  PatchStrategy,
  ServerConfiguration,
  createConfiguration,
  setHeaderMiddleware,
  type ConfigurationOptions,
  type ObservableMiddleware,
  type RequestContext,
} from '@kubernetes/client-node';
import { ErrorCode, PortalError } from '../observability/errors.ts';
import { FencedHttpLibrary, fenceMiddleware, type Fence } from './fenced-http.ts';
import { TokenBucket } from './rate-limiter.ts';

export interface KubeClientConfig {
  /** Path of a kubeconfig file. One of kubeconfigPath / kubeconfigYaml / inCluster. */
  kubeconfigPath?: string;
  /** Kubeconfig content (YAML or JSON). */
  kubeconfigYaml?: string;
  /** Use the pod's service account (in-cluster config). */
  inCluster?: boolean;
  /** Sustained write rate for `writeLimiter`. @default 20 */
  qps: number;
  /** Write burst for `writeLimiter`. @default 30 */
  burst: number;
  /** Sent as User-Agent on every generated-API call, e.g. `portal/0.1.0 (replica-0)`. */
  userAgent: string;
}

export interface KubeClient {
  readonly kubeConfig: KubeConfig;
  /** Base URL of the current cluster. */
  readonly server: string;
  readonly core: CoreV1Api;
  readonly coordination: CoordinationV1Api;
  readonly customObjects: CustomObjectsApi;
  /** Paces writes (qps/burst); callers `await writeLimiter.take(signal)` before a write. */
  readonly writeLimiter: TokenBucket;
  readonly userAgent: string;
}

export function loadKubeConfig(config: Pick<KubeClientConfig, 'kubeconfigPath' | 'kubeconfigYaml' | 'inCluster'>): KubeConfig {
  const kc = new KubeConfig();
  try {
    if (config.kubeconfigYaml !== undefined) kc.loadFromString(config.kubeconfigYaml);
    else if (config.kubeconfigPath !== undefined) kc.loadFromFile(config.kubeconfigPath);
    else if (config.inCluster === true) kc.loadFromCluster();
    else throw new Error('no kubeconfig given (kubeconfigPath, kubeconfigYaml or inCluster)');
  } catch (err) {
    throw new PortalError(ErrorCode.ConfigInvalid, `cannot load kubeconfig: ${(err as Error).message}`, { cause: err });
  }
  if (!kc.getCurrentCluster()) throw new PortalError(ErrorCode.ConfigInvalid, 'kubeconfig has no current cluster');
  return kc;
}

export function createKubeClient(config: KubeClientConfig): KubeClient {
  const kc = loadKubeConfig(config);
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new PortalError(ErrorCode.ConfigInvalid, 'kubeconfig has no current cluster');
  // Same wiring as KubeConfig.makeApiClient, plus a User-Agent middleware so
  // the API server's audit log names the replica, and an HTTP library that
  // pools connections (connect-first agents) and re-checks a call's fence
  // at the connected socket (fenced-http.ts; leader-only writes use the
  // replica's FencedWriter, fenced-writer.ts). Only one static middleware: client-node reverses the
  // static list in place on every response, so two would swap order per call.
  const configuration = createConfiguration({
    baseServer: new ServerConfiguration(cluster.server, {}),
    httpApi: new FencedHttpLibrary(),
    authMethods: { default: kc },
    middleware: [setHeaderMiddleware('User-Agent', config.userAgent)],
  });
  return Object.freeze({
    kubeConfig: kc,
    server: cluster.server,
    core: new CoreV1Api(configuration),
    coordination: new CoordinationV1Api(configuration),
    customObjects: new CustomObjectsApi(configuration),
    writeLimiter: new TokenBucket({ qps: config.qps, burst: config.burst }),
    userAgent: config.userAgent,
  });
}

/**
 * Middleware that attaches an AbortSignal to the underlying fetch. Per-call
 * options must use the Observable flavour (like client-node's own
 * setHeaderOptions): a Promise middleware fails with "toPromise is not a
 * function" in 1.4.0.
 */
function signalMiddleware(signal: AbortSignal): ObservableMiddleware {
  return {
    pre: (request: RequestContext) => {
      request.setSignal(signal);
      return new Observable(Promise.resolve(request));
    },
    post: (response) => new Observable(Promise.resolve(response)),
  };
}

export interface CallOptions {
  /** Aborts the HTTP request. */
  signal?: AbortSignal;
  /** Aborts the HTTP request after this long. */
  timeoutMs?: number;
  /** Content-Type override (patch strategies). */
  contentType?: string;
  /**
   * Leader-only writes: `() => term.assertValid()`. Checked again right
   * before the request is handed to the transport and synchronously before
   * its bytes are written to the socket (after any connect / TLS handshake);
   * when it throws, nothing is sent and the call rejects with its error.
   */
  fence?: Fence;
}

/**
 * Per-call options for the generated APIs: cancellation, a timeout, and the
 * Content-Type (generated patch methods default to JSON Patch).
 */
export function callOptions(options: CallOptions): ConfigurationOptions {
  const middleware: ObservableMiddleware[] = [];
  const signals: AbortSignal[] = [];
  if (options.signal) signals.push(options.signal);
  if (options.timeoutMs !== undefined) signals.push(AbortSignal.timeout(options.timeoutMs));
  if (signals.length > 0) middleware.push(signalMiddleware(signals.length === 1 ? signals[0]! : AbortSignal.any(signals)));
  if (options.contentType !== undefined) middleware.push(setHeaderMiddleware('Content-Type', options.contentType));
  if (options.fence) middleware.push(fenceMiddleware(options.fence));
  return { middleware, middlewareMergeStrategy: 'append' };
}

/** Options for a JSON merge patch (RFC 7386) through a generated patch method. */
export function mergePatchOptions(options: Omit<CallOptions, 'contentType'> = {}): ConfigurationOptions {
  return callOptions({ ...options, contentType: PatchStrategy.MergePatch });
}

/** HTTP status of a client-node ApiException (or a Watch error), if any. */
export function apiStatusCode(err: unknown): number | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const e = err as { code?: unknown; statusCode?: unknown };
  if (typeof e.code === 'number') return e.code;
  if (typeof e.statusCode === 'number') return e.statusCode;
  return undefined;
}

/** `reason` of the Status body of a client-node ApiException (`Conflict`, `NotFound`…). */
export function apiReason(err: unknown): string | undefined {
  const body = (err as { body?: unknown } | null)?.body;
  if (typeof body !== 'string') return undefined;
  try {
    const parsed = JSON.parse(body) as { reason?: unknown };
    return typeof parsed.reason === 'string' ? parsed.reason : undefined;
  } catch {
    return undefined;
  }
}

/** One-line description of an API error for logs (never the request body). */
export function describeApiError(err: unknown): string {
  const code = apiStatusCode(err);
  const reason = apiReason(err);
  const message = err instanceof Error ? err.message.split('\n')[0] : String(err);
  return code !== undefined ? `${code}${reason ? ` ${reason}` : ''}: ${message}` : (message ?? 'unknown error');
}
