/**
 * The embedded Kubernetes API server (docs/design.md §7): in memory, HTTPS on
 * loopback (plus plain HTTP on the same port for in-process tests that ask
 * for it), bearer-token users, with fault injection and an audit
 * log for tests. See docs/devcluster-api.md.
 */
import pino, { type Logger } from 'pino';
import YAML from 'yaml';
import type { AdmissionHook } from './admission-hook.ts';
import { Access, type AuthorizationMode } from './access.ts';
import { AuditLog, type AuditEntry } from './audit.ts';
import { bootstrapPolicy } from './rbac-bootstrap.ts';
import { Users } from './auth.ts';
import { Cluster, type Reply, type RequestScope } from './cluster.ts';
import { Faults } from './faults.ts';
import { startControllers, type Controllers, type ControllersOptions } from '../controllers/index.ts';
import { RequestCounts } from './request-counts.ts';
import { createListener, selfSignedCert } from './listener.ts';
import { Router } from './router.ts';
import { errors } from './status.ts';
import { isPlainObject } from './types.ts';
import { LogKey } from 'portal/dev-api';

export type { AdmissionAttributes, AdmissionContext, AdmissionHook, AdmissionOutcome } from './admission-hook.ts';
export type { AuditEntry } from './audit.ts';

export interface ApiServerOptions {
  /** @default '127.0.0.1' */
  host?: string;
  /** @default 0 (an ephemeral port) */
  port?: number;
  admission?: AdmissionHook;
  /** Events retained for watches resuming from a resourceVersion; older is 410 Expired. @default 10000 */
  historyLimit?: number;
  /** Interval of BOOKMARK events on watches that allow them. @default 60000 (kube sends about one a minute) */
  bookmarkIntervalMs?: number;
  tls?: { cert: string; key: string };
  /**
   * Also answer plain HTTP on the same port (the first byte of a connection
   * decides), so in-process tests and benches can use fetch/client-node
   * without a CA. `portal dev` turns it off: kube-apiserver speaks HTTPS only.
   * @default true
   */
  plainHttp?: boolean;
  logger?: Logger;
  /** Namespaces present from the start, as on a fresh cluster. @default ['default','kube-system','kube-public','kube-node-lease'] */
  namespaces?: string[];
  /**
   * Run the workload controllers and the simulated node `portal-dev-node`
   * (src/devcluster/controllers/). `portal dev` turns them on; off by default
   * so tests of the bare REST semantics see no writes they did not make.
   */
  controllers?: ControllersOptions | boolean;
  /**
   * `RBAC` enforces Roles/ClusterRoles and their bindings for every identity
   * but system:masters (the admin), with kube's bootstrap roles; impersonation
   * is checked either way. @default 'AlwaysAllow' (tests of the REST semantics)
   */
  authorization?: AuthorizationMode;
}

export interface ApiServerFaults {
  /** Holds requests for `ms` (of `user`; with `path`, only paths containing it; with `methods`, only those). */
  setLatency(ms: number, scope?: { user?: string; path?: string; methods?: string[] }): void;
  setErrorRate(fraction: number, code: 500 | 429, scope?: { user?: string; verbs?: string[] }): void;
  dropWatches(scope?: { user?: string }): void;
  cutOff(user: string): void;
  restore(user?: string): void;
  clear(): void;
  /** `METHOD path` of the requests of `user` held by the latency fault right now (in flight, not yet served). */
  delayed(user: string): string[];
}

export interface ApiServer {
  /** http://127.0.0.1:PORT with `plainHttp` (unless `tls` was given), else https://. */
  url: string;
  /** https://127.0.0.1:PORT (kubectl sends tokens only over TLS). */
  httpsUrl: string;
  /** PEM of the serving certificate (self-signed, SANs localhost/127.0.0.1/::1, unless `tls` was given). */
  caCert: string;
  /** Token of the built-in `admin` user (group system:masters); the only one allowed on /_portal. */
  adminToken: string;
  addUser(name: string, groups?: string[]): string;
  /** A kubeconfig (YAML) for `user` (created if unknown), usable by kubectl and client-node. */
  kubeConfig(user: string): string;
  faults: ApiServerFaults;
  auditLog(): AuditEntry[];
  /** Resolves when the controllers (if running) have no work queued (benches and tests). */
  controllersIdle(): Promise<void>;
  /** Watches open right now (of `user`, or of everyone): lets a test prove a client left none behind. */
  openWatches(user?: string): number;
  close(): Promise<void>;
}

const ADMIN = 'admin';

function sideApi(faults: Faults, audit: AuditLog, users: Users, requests: RequestCounts): (method: string, path: string, body: unknown) => Promise<Reply> {
  return async (method, path, body) => {
    const b = isPlainObject(body) ? body : {};
    const scope = (): { user?: string } => (typeof b['user'] === 'string' ? { user: b['user'] } : {});
    if (method === 'GET' && path === '/_portal/audit') return { code: 200, body: audit.all() };
    if (method === 'GET' && path === '/_portal/faults') return { code: 200, body: faults.snapshot() };
    if (method === 'GET' && path === '/_portal/requests') return { code: 200, body: requests.snapshot() };
    if (method === 'POST' && path === '/_portal/users') {
      if (typeof b['name'] !== 'string') throw errors.badRequest('name is required');
      const groups = Array.isArray(b['groups']) ? b['groups'].map(String) : [];
      return { code: 201, body: { name: b['name'], token: users.add(b['name'], groups) } };
    }
    if (method === 'POST' && path === '/_portal/faults') {
      switch (b['action']) {
        case 'latency': {
          const narrow: { path?: string; methods?: string[] } = {};
          if (typeof b['path'] === 'string') narrow.path = b['path'];
          if (Array.isArray(b['methods'])) narrow.methods = b['methods'].map(String);
          faults.setLatency(Number(b['ms'] ?? 0), { ...scope(), ...narrow });
          break;
        }
        case 'errorRate': {
          const code = b['code'] === 429 ? 429 : 500;
          const verbs = Array.isArray(b['verbs']) ? b['verbs'].map(String) : undefined;
          faults.setErrorRate(Number(b['fraction'] ?? 0), code, verbs ? { ...scope(), verbs } : scope());
          break;
        }
        case 'dropWatches': faults.dropWatches(scope()); break;
        case 'cutOff':
          if (typeof b['user'] !== 'string') throw errors.badRequest('user is required');
          faults.cutOff(b['user']);
          break;
        case 'restore': faults.restore(scope().user); break;
        case 'clear': faults.clear(); break;
        default: throw errors.badRequest(`unknown action ${JSON.stringify(b['action'])}: latency | errorRate | dropWatches | cutOff | restore | clear`);
      }
      return { code: 200, body: faults.snapshot() };
    }
    throw errors.notFound('_portal', '', path);
  };
}

/** What a fresh kube-apiserver holds: the initial namespaces and, with RBAC, the bootstrap roles and bindings. */
async function bootstrap(cluster: Cluster, namespaces: readonly string[], rbac: boolean): Promise<void> {
  const system = { username: ADMIN, uid: 'admin', groups: ['system:masters'] };
  const nsDef = cluster.registry.get('', 'v1', 'namespaces')!;
  for (const name of namespaces) {
    const s: RequestScope = { def: nsDef, namespace: '', name: '', subresource: '', user: system, query: new URLSearchParams(), warnings: [] };
    await cluster.create(s, { metadata: { name } }, { skipAdmission: true });
  }
  if (!rbac) return;
  for (const [resource, obj] of bootstrapPolicy()) {
    const def = cluster.registry.get('rbac.authorization.k8s.io', 'v1', resource)!;
    await cluster.create({ def, namespace: '', name: '', subresource: '', user: system, query: new URLSearchParams(), warnings: [] }, obj, { skipAdmission: true });
  }
}

/** A kubeconfig for `user` (bearer token) against the server at `httpsUrl`. */
function kubeConfigYaml(httpsUrl: string, caCert: string, user: string, token: string): string {
  return YAML.stringify({
    apiVersion: 'v1', kind: 'Config',
    clusters: [{ name: 'portal-dev', cluster: { server: httpsUrl, 'certificate-authority-data': Buffer.from(caCert).toString('base64') } }],
    users: [{ name: user, user: { token } }],
    contexts: [{ name: 'portal-dev', context: { cluster: 'portal-dev', user, namespace: 'default' } }],
    'current-context': 'portal-dev',
    preferences: {},
  });
}

export async function startApiServer(opts: ApiServerOptions = {}): Promise<ApiServer> {
  const logger = (opts.logger ?? pino({ level: 'silent' })).child({ [LogKey.component]: 'apiserver' });
  const abort = new AbortController();
  const tls = opts.tls ?? (await selfSignedCert());
  const cluster = new Cluster(opts.historyLimit ?? 10_000, opts.admission, abort.signal);
  cluster.rootCaCert = tls.cert;
  const users = new Users();
  const adminToken = users.add(ADMIN, ['system:masters']);
  const audit = new AuditLog();
  const requests = new RequestCounts();
  let address = '';
  // eslint-disable-next-line prefer-const
  let router: Router;
  const faults = new Faults({ dropWatches: (u) => router.dropWatches(u), dropConnections: (u) => router.dropConnections(u) });
  const access = new Access(cluster.store, opts.authorization ?? 'AlwaysAllow');
  router = new Router({
    cluster, users, faults, audit, requests, logger, adminUser: ADMIN, access,
    bookmarkIntervalMs: opts.bookmarkIntervalMs ?? 60_000,
    serverAddress: () => address,
    side: sideApi(faults, audit, users, requests),
  });
  await bootstrap(cluster, opts.namespaces ?? ['default', 'kube-system', 'kube-public', 'kube-node-lease'], access.mode === 'RBAC');
  let controllers: Controllers | undefined;
  if (opts.controllers) {
    controllers = await startControllers(cluster, opts.controllers === true ? {} : opts.controllers, logger, abort.signal);
  }

  const handler = router.handle.bind(router);
  const plainHttp = opts.plainHttp ?? true;
  const listener = createListener(handler, tls, { plainHttp });
  try {
    await listener.listen(opts.port ?? 0, opts.host ?? '127.0.0.1');
  } catch (err) {
    abort.abort();
    cluster.close();
    throw err;
  }
  const addr = listener.address();
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  address = `${host}:${addr.port}`;
  const url = `${plainHttp && !opts.tls ? 'http' : 'https'}://${address}`;
  const httpsUrl = `https://${address}`;
  logger.info({ [LogKey.url]: url }, 'embedded apiserver listening');

  let closing: Promise<void> | undefined;
  return {
    url,
    httpsUrl,
    caCert: listener.cert,
    adminToken,
    addUser: (name, groups) => users.add(name, groups),
    kubeConfig(user) {
      const token = users.tokenFor(user) ?? users.add(user);
      return kubeConfigYaml(httpsUrl, listener.cert, user, token);
    },
    faults: {
      setLatency: (ms, scope) => faults.setLatency(ms, scope),
      setErrorRate: (fraction, code, scope) => faults.setErrorRate(fraction, code, scope),
      dropWatches: (scope) => faults.dropWatches(scope),
      cutOff: (user) => faults.cutOff(user),
      delayed: (user) => faults.delayed(user),
      restore: (user) => faults.restore(user),
      clear: () => faults.clear(),
    },
    auditLog: () => audit.all(),
    controllersIdle: () => controllers?.idle() ?? Promise.resolve(),
    openWatches: (user) => [...router.watches].filter((w) => user === undefined || w.user === user).length,
    close() {
      closing ??= (async () => {
        abort.abort();
        cluster.close();
        router.dropWatches();
        await listener.close();
      })();
      return closing;
    },
  };
}
