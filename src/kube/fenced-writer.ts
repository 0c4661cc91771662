/**
 * The one transport for leader-only side effects. A replica owns one
 * FencedWriter for its lifetime; every leader-only write — policy reports,
 * rule status, the idempotency ledger, label/annotate patches, evictions and
 * Alertmanager alerts — goes through it, with the current term:
 *
 * ```ts
 * await writer.core.createNamespacedPodEviction(params, writer.options(term, { signal }));
 * await writer.objects.patch(spec, undefined, undefined, 'portal', undefined, PatchStrategy.MergePatch, writer.objectOptions(term, { signal }));
 * await writer.request(`${url}/api/v2/alerts`, term, { method: 'POST', headers, body, signal });
 * ```
 *
 * Each request is checked against the term when the call starts, when the
 * transport starts it, and synchronously before its first byte reaches a
 * connected socket (kube/fenced-http.ts, ADR 0009): a write whose term
 * expires before its bytes reach the socket is not sent. The writer's
 * transport refuses a non-GET request without a term, so a leader-only write
 * cannot leave it unfenced by mistake; GETs (discovery, a re-read after a
 * 409) pass, they are not side effects.
 *
 * Its connections are its own (keep-alive, per TLS identity), separate from
 * the reads and Lease renewals of the replica's KubeClient.
 *
 * `close()` is idempotent: writes started afterwards reject with
 * PortalError(Closed); it resolves once the writes in flight have settled and
 * the pooled sockets are closed.
 */
import type http from 'node:http';
import {
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  ServerConfiguration,
  createConfiguration,
  setHeaderMiddleware,
  type Configuration,
  type ConfigurationOptions,
  type KubeConfig,
} from '@kubernetes/client-node';
import { ErrorCode, PortalError } from '../observability/errors.ts';
import { callOptions } from './client.ts';
import { ConnectedHttpAgent, ConnectedHttpsAgent, FencedHttpLibrary, retireAgent, sendFenced } from './fenced-http.ts';
import { PrefetchingObjectApi } from './object-api.ts';

/** What a write is fenced by: a leader term (leader/term.ts `LeaderTerm`); `assertValid()` throws PortalError(TermExpired) once it ended. */
export interface WriteTerm {
  assertValid(): void;
}

export interface FencedWriterOptions {
  /** Credentials and server of the cluster (the replica's KubeClient.kubeConfig). */
  kubeConfig: KubeConfig;
  /** Sent as User-Agent on every Kubernetes write, e.g. `portal/0.1.0 (replica-0)`. */
  userAgent: string;
}

export interface WriteCallOptions {
  /** Aborts the request. */
  signal?: AbortSignal;
  /** Aborts the request after this long. */
  timeoutMs?: number;
}

export interface WriteRequestOptions {
  method: string;
  headers?: Record<string, string>;
  body?: string;
  signal: AbortSignal;
}

export interface WriteResponse {
  status: number;
  text: string;
}

function closedError(): PortalError {
  return new PortalError(ErrorCode.Closed, 'the leader-only writer is closed');
}

export class FencedWriter {
  /** Generated clients on the writer's transport; every call passes {@link FencedWriter.options}. */
  readonly core: CoreV1Api;
  readonly customObjects: CustomObjectsApi;
  /** Generic merge patches (label/annotate); `resolvePath()` does its discovery GET before the fence. */
  readonly objects: PrefetchingObjectApi;
  readonly #kube = new FencedHttpLibrary({ requireFenceForWrites: true });
  /** Pools for writes outside Kubernetes (Alertmanager); idle sockets are unref'd by Node. */
  readonly #plain = new ConnectedHttpAgent({ keepAlive: true });
  readonly #tls = new ConnectedHttpsAgent({ keepAlive: true });
  readonly #inFlight = new Set<Promise<unknown>>();
  #closing: Promise<void> | undefined;

  constructor(options: FencedWriterOptions) {
    const kc = options.kubeConfig;
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new PortalError(ErrorCode.ConfigInvalid, 'kubeconfig has no current cluster');
    // Same wiring as kube/client.ts (one static middleware, see there), on the writer's own transport.
    const configuration = createConfiguration({
      baseServer: new ServerConfiguration(cluster.server, {}),
      httpApi: this.#kube,
      authMethods: { default: kc },
      middleware: [setHeaderMiddleware('User-Agent', options.userAgent)],
    });
    this.core = new CoreV1Api(configuration);
    this.customObjects = new CustomObjectsApi(configuration);
    this.objects = PrefetchingObjectApi.create(configuration, kc);
  }

  get closed(): boolean {
    return this.#closing !== undefined;
  }

  /**
   * Per-call options for one leader-only Kubernetes write under `term`.
   * Throws PortalError(Closed) once the writer is closed.
   */
  options(term: WriteTerm, options: WriteCallOptions = {}): ConfigurationOptions {
    return callOptions({ ...options, fence: this.#fence(term) });
  }

  /** {@link FencedWriter.options} for a JSON merge patch (RFC 7386) through a generated patch method. */
  mergePatchOptions(term: WriteTerm, options: WriteCallOptions = {}): ConfigurationOptions {
    return callOptions({ ...options, contentType: PatchStrategy.MergePatch, fence: this.#fence(term) });
  }

  /**
   * Options for one leader-only call of {@link FencedWriter.objects} (whose
   * calls take a Configuration, not per-call middleware).
   */
  objectOptions(term: WriteTerm, options: WriteCallOptions = {}): Configuration {
    const signals = [options.signal, options.timeoutMs !== undefined ? AbortSignal.timeout(options.timeoutMs) : undefined].filter((s): s is AbortSignal => s !== undefined);
    return this.objects.callOptions({ fence: this.#fence(term), ...(signals.length > 0 ? { signal: AbortSignal.any(signals) } : {}) });
  }

  /**
   * A leader-only HTTP request outside Kubernetes (Alertmanager), fenced the
   * same way. Rejects with the term's error when fenced, with
   * `signal.reason` when aborted, otherwise with the transport error.
   */
  request(url: string, term: WriteTerm, options: WriteRequestOptions): Promise<WriteResponse> {
    if (this.#closing) return Promise.reject(closedError());
    const fence = this.#fence(term);
    const agent = new URL(url).protocol === 'https:' ? this.#tls : this.#plain;
    const sent = sendFenced(url, { method: options.method, headers: options.headers ?? {}, body: options.body, agent, signal: options.signal, fence }).then((res) => ({
      status: res.status,
      text: res.body.toString('utf8'),
    }));
    this.#track(sent);
    return sent;
  }

  /** Refuses new writes, waits for the ones in flight, closes pooled sockets. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      // Writes already started finish under their term (which still fences them); then the pools close.
      await Promise.allSettled([this.#kube.drain(), ...this.#inFlight]);
      this.#kube.close();
      for (const agent of [this.#plain, this.#tls] as http.Agent[]) retireAgent(agent);
    })();
    return this.#closing;
  }

  #fence(term: WriteTerm): () => void {
    if (this.#closing) throw closedError();
    return () => term.assertValid();
  }

  #track(p: Promise<unknown>): void {
    const settled = p.then(
      () => undefined,
      () => undefined,
    );
    this.#inFlight.add(settled);
    void settled.then(() => this.#inFlight.delete(settled));
  }
}
