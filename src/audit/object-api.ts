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
import { KubernetesObjectApi, ServerConfiguration, createConfiguration, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import { FencedHttpLibrary } from '../kube/fenced-http.ts';

export class PrefetchingObjectApi extends KubernetesObjectApi {
  static fromKubeConfig(kc: KubeConfig): PrefetchingObjectApi {
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new Error('kubeconfig has no current cluster');
    // kc.makeApiClient, with the pooled HTTP library of kube/client.ts: a patch reuses a
    // connection instead of a fresh connect + TLS handshake (fewer places to be paused in).
    const api = new PrefetchingObjectApi(createConfiguration({ baseServer: new ServerConfiguration(cluster.server, {}), authMethods: { default: kc }, httpApi: new FencedHttpLibrary() }));
    api.setDefaultNamespace(kc);
    return api;
  }

  /** Resolves and caches the path `patch(spec)` will use (discovery, at most once per apiVersion). */
  async resolvePath(spec: KubernetesObject): Promise<void> {
    await this.specUriPath(spec, 'patch');
  }
}
