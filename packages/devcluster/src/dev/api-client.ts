/**
 * The few API calls `portal dev` makes to set up its cluster, with the
 * admin token: no client library, the paths are fixed. HTTPS with the API
 * server's CA (what `portal dev` serves), or plain HTTP for in-process tests.
 */
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { ErrorCode, PortalError } from 'portal/dev-api';

/** Plural resource paths of the kinds dev installs. */
const RESOURCES: Record<string, { prefix: string; plural: string; namespaced: boolean }> = {
  Namespace: { prefix: '/api/v1', plural: 'namespaces', namespaced: false },
  Service: { prefix: '/api/v1', plural: 'services', namespaced: true },
  CustomResourceDefinition: { prefix: '/apis/apiextensions.k8s.io/v1', plural: 'customresourcedefinitions', namespaced: false },
  ValidatingWebhookConfiguration: { prefix: '/apis/admissionregistration.k8s.io/v1', plural: 'validatingwebhookconfigurations', namespaced: false },
  PortalRule: { prefix: '/apis/portal.dev/v1alpha1', plural: 'portalrules', namespaced: true },
  PortalClusterRule: { prefix: '/apis/portal.dev/v1alpha1', plural: 'portalclusterrules', namespaced: false },
  PortalException: { prefix: '/apis/portal.dev/v1alpha1', plural: 'portalexceptions', namespaced: true },
  // The chart's RBAC (chart-rbac.ts).
  ServiceAccount: { prefix: '/api/v1', plural: 'serviceaccounts', namespaced: true },
  ClusterRole: { prefix: '/apis/rbac.authorization.k8s.io/v1', plural: 'clusterroles', namespaced: false },
  ClusterRoleBinding: { prefix: '/apis/rbac.authorization.k8s.io/v1', plural: 'clusterrolebindings', namespaced: false },
  Role: { prefix: '/apis/rbac.authorization.k8s.io/v1', plural: 'roles', namespaced: true },
  RoleBinding: { prefix: '/apis/rbac.authorization.k8s.io/v1', plural: 'rolebindings', namespaced: true },
};

export class DevApiClient {
  constructor(
    private readonly baseUrl: string,
    private readonly token: string,
    /** PEM of the CA that signed the server's certificate (https:// only). */
    private readonly ca?: string,
  ) {}

  private path(obj: Record<string, unknown>): string {
    const kind = String(obj['kind']);
    const r = RESOURCES[kind];
    if (!r) throw new PortalError(ErrorCode.Internal, `portal dev cannot install kind ${kind}`);
    const meta = (obj['metadata'] ?? {}) as { namespace?: string };
    return r.namespaced ? `${r.prefix}/namespaces/${meta.namespace ?? 'default'}/${r.plural}` : `${r.prefix}/${r.plural}`;
  }

  /** Creates `obj`; an existing object of that name is replaced (create-or-update). */
  async apply(obj: Record<string, unknown>): Promise<void> {
    const collection = this.path(obj);
    const name = String((obj['metadata'] as { name: string }).name);
    const created = await this.request('POST', collection, obj);
    if (created.status === 201 || created.status === 200) return;
    if (created.status === 409) {
      const current = await this.request('GET', `${collection}/${name}`);
      const rv = (current.body as { metadata?: { resourceVersion?: string } }).metadata?.resourceVersion;
      const meta = { ...(obj['metadata'] as object), ...(rv ? { resourceVersion: rv } : {}) };
      const put = await this.request('PUT', `${collection}/${name}`, { ...obj, metadata: meta });
      if (put.status === 200 || put.status === 201) return;
      throw this.failure('update', obj, put);
    }
    throw this.failure('create', obj, created);
  }

  private failure(verb: string, obj: Record<string, unknown>, res: { status: number; body: unknown }): PortalError {
    const message = (res.body as { message?: string } | null)?.message ?? JSON.stringify(res.body);
    const name = (obj['metadata'] as { name?: string }).name;
    return new PortalError(ErrorCode.Kube, `cannot ${verb} ${String(obj['kind'])} "${name}": ${res.status} ${message}`);
  }

  async request(method: string, path: string, body?: unknown): Promise<{ status: number; body: unknown }> {
    const url = new URL(`${this.baseUrl}${path}`);
    const payload = body !== undefined ? JSON.stringify(body) : undefined;
    const headers: Record<string, string> = { authorization: `Bearer ${this.token}`, 'content-type': 'application/json', accept: 'application/json' };
    if (payload !== undefined) headers['content-length'] = String(Buffer.byteLength(payload));
    const { status, text } = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
      const req = send(url, { method, headers, ...(this.ca !== undefined ? { ca: this.ca } : {}) }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(payload);
    });
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // not JSON: keep the text for the error message
    }
    return { status, body: parsed };
  }
}
