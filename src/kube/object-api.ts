/**
 * The generic object client for label/annotate patches, with the one
 * network round trip `patch()` makes before its request — API discovery, to
 * turn (apiVersion, kind) into a path — available separately.
 *
 * Why: a side effect is fenced by `term.assertValid()` immediately before it
 * is sent. If `patch()` itself awaited discovery after the fence, a leader
 * paused in that wait (SIGSTOP, a long GC) would wake with the discovery
 * answer already queued, continue into the request and send a stale write
 * after its successor took over — the exactly-once e2e caught exactly that
 * (a second annotate patch by the paused leader). Resolving the path before
 * the fence leaves no I/O between the check and the request (the result is
 * cached per apiVersion, so it costs one request per kind per process).
 */
import { KubernetesObjectApi, type Configuration, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import { registerFence, type Fence } from './fenced-http.ts';

/** What one call carries (KubernetesObjectApi ignores per-call middleware). */
export interface ObjectCallExtras {
  fence?: Fence;
  signal?: AbortSignal;
}

/** Built by FencedWriter (kube/fenced-writer.ts) on its transport: `writer.objects`. */
export class PrefetchingObjectApi extends KubernetesObjectApi {
  static create(configuration: Configuration, kc: KubeConfig): PrefetchingObjectApi {
    const api = new PrefetchingObjectApi(configuration);
    api.setDefaultNamespace(kc);
    return api;
  }

  /**
   * The `options` argument for one call (e.g. `patch(…, api.callOptions({ fence, signal }))`).
   * KubernetesObjectApi applies neither per-call middleware nor the options'
   * transport; what it does take from them is `baseServer`, which makes the
   * request: that is where the call's fence and signal are attached.
   */
  callOptions(extras: ObjectCallExtras): Configuration {
    const base = this.configuration.baseServer;
    const baseServer = Object.create(base) as typeof base;
    baseServer.makeRequestContext = (endpoint, method) => {
      const request = base.makeRequestContext(endpoint, method);
      if (extras.signal) request.setSignal(extras.signal);
      if (extras.fence) registerFence(request, extras.fence);
      return request;
    };
    return Object.create(this.configuration, { baseServer: { value: baseServer } }) as Configuration;
  }
  /** Resolves and caches the path `patch(spec)` will use (discovery, at most once per apiVersion). */
  async resolvePath(spec: KubernetesObject): Promise<void> {
    await this.specUriPath(spec, 'patch');
  }
}
