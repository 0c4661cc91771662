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
import { KubernetesObjectApi, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';

export class PrefetchingObjectApi extends KubernetesObjectApi {
  static fromKubeConfig(kc: KubeConfig): PrefetchingObjectApi {
    const api = kc.makeApiClient(PrefetchingObjectApi);
    api.setDefaultNamespace(kc);
    return api;
  }

  /** Resolves and caches the path `patch(spec)` will use (discovery, at most once per apiVersion). */
  async resolvePath(spec: KubernetesObject): Promise<void> {
    await this.specUriPath(spec, 'patch');
  }
}
