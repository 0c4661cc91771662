/**
 * HTTP front: authentication, fault injection, path parsing and dispatch to
 * the cluster, watch, discovery, OpenAPI and the `/_portal` side API.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import type { Access } from './access.ts';
import type { AuditLog } from './audit.ts';
import type { RequestCounts } from './request-counts.ts';
import type { Users } from './auth.ts';
import type { Cluster, Reply, RequestScope } from './cluster.ts';
import { apiGroupList, apiResourceList, apiVersions, VERSION_INFO } from './discovery.ts';
import { evict } from './eviction.ts';
import type { Faults } from './faults.ts';
import { decodeProtobufBody, parseJson, readBody, readBodyBytes, readJsonOrProtobuf, readObjectBody } from './http-body.ts';
import { sendJson, sendReply } from './http-reply.ts';
import { isProtobufBody } from './protobuf/negotiate.ts';
import { OPENAPI_V2_CONTENT_TYPE, openapiV2Json, openapiV2Protobuf, openapiV3Doc, openapiV3Index } from './openapi.ts';
import { NO_RUNTIME, noRuntime, parseResourcePath, requestVerb } from './request-path.ts';
import { serveScale } from './scale.ts';
import { SELF_SUBJECT_REVIEW_PATH, selfSubjectReview } from './whoami.ts';
import { ApiError, errors } from './status.ts';
import { toTable, wantsTable } from './table.ts';
import { isPlainObject, meta, type Obj, type UserInfo } from './types.ts';
import { serveWatch, type ActiveWatch } from './watch.ts';
import { LogKey, toError } from 'portal/dev-api';

const WRITE_VERBS = new Set(['create', 'update', 'patch', 'delete', 'deletecollection']);

export interface RouterDeps {
  cluster: Cluster;
  users: Users;
  faults: Faults;
  audit: AuditLog;
  /** Every authenticated non-side request, by user (optional). */
  requests?: RequestCounts;
  logger: Logger;
  bookmarkIntervalMs: number;
  serverAddress: () => string;
  adminUser: string;
  /** Impersonation, authorization and the review APIs (access.ts). */
  access?: Access;
  /** Side API handler for /_portal (already authenticated as admin). */
  side: (method: string, path: string, body: unknown) => Promise<Reply>;
}


export class Router {
  readonly watches = new Set<ActiveWatch>();
  private readonly sockets = new Map<string, Set<Socket>>();
  private readonly socketUser = new WeakMap<Socket, string>();

  constructor(private readonly d: RouterDeps) {}

  dropWatches(user?: string): void {
    for (const w of [...this.watches]) if (user === undefined || w.user === user) w.close();
  }

  dropConnections(user: string): void {
    for (const s of this.sockets.get(user) ?? []) s.destroy();
    this.dropWatches(user);
  }

  /** A keep-alive socket belongs to the user of its latest request (clients pool connections across tokens). */
  private track(user: string, socket: Socket): void {
    const owner = this.socketUser.get(socket);
    if (owner !== undefined && owner !== user) this.sockets.get(owner)?.delete(socket);
    this.socketUser.set(socket, user);
    let set = this.sockets.get(user);
    if (!set) {
      set = new Set();
      this.sockets.set(user, set);
    }
    if (set.has(socket)) return;
    set.add(socket);
    socket.once('close', () => this.sockets.get(this.socketUser.get(socket) ?? '')?.delete(socket));
  }

  handle(req: IncomingMessage, res: ServerResponse): void {
    this.route(req, res).catch((e: unknown) => {
      if (e instanceof ApiError) sendJson(res, e.code, e.toStatus());
      else {
        this.d.logger.error({ [LogKey.error]: toError(e) }, 'apiserver request failed');
        sendJson(res, 500, errors.internal((e as Error).message).toStatus());
      }
    });
  }

  private async route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const path = url.pathname.replace(/\/+$/, '') || '/';
    const method = req.method ?? 'GET';
    if (path === '/healthz' || path === '/readyz' || path === '/livez') {
      res.writeHead(200, { 'Content-Type': 'text/plain; charset=utf-8' });
      res.end('ok');
      return;
    }
    const authenticated = this.d.users.authenticate(req.headers.authorization);
    if (!authenticated) {
      sendJson(res, 401, errors.unauthorized().toStatus());
      return;
    }
    const user = this.d.access ? this.d.access.identify(req.headers, authenticated) : authenticated;
    if (path.startsWith('/_portal/')) {
      this.track(user.username, req.socket);
      if (user.username !== this.d.adminUser) {
        sendJson(res, 403, new ApiError(403, 'Forbidden', 'the /_portal side API needs the admin token').toStatus());
        return;
      }
      const raw = method === 'GET' ? '' : await readBody(req);
      let body: unknown;
      try {
        body = raw ? JSON.parse(raw) : null;
      } catch {
        throw errors.badRequest('body is not JSON');
      }
      const r = await this.d.side(method, path, body);
      sendJson(res, r.code, r.body);
      return;
    }
    if (this.d.faults.isCutOff(user.username)) {
      req.socket.destroy();
      return;
    }
    this.track(user.username, req.socket);
    const latency = this.d.faults.latencyFor(user.username, method, path);
    if (latency > 0) await this.d.faults.delay(user.username, `${method} ${path}`, latency);
    if (this.d.faults.isCutOff(user.username)) {
      req.socket.destroy();
      return;
    }
    // A list or watch by exact name (a metadata.name field selector) is authorized as that name: keep it in the key.
    const byName = /^metadata\.name==?[^,=!]+$/.test(url.searchParams.get('fieldSelector') ?? '') ? `?fieldSelector=${url.searchParams.get('fieldSelector')}` : '';
    this.d.requests?.record(user.username, method, `${path}${byName}`, url.searchParams.get('watch') === 'true' || url.searchParams.get('watch') === '1');
    await this.dispatch(req, res, method, path, url.searchParams, user);
  }

  private async dispatch(req: IncomingMessage, res: ServerResponse, method: string, path: string, query: URLSearchParams, user: UserInfo): Promise<void> {
    const reg = this.d.cluster.registry;
    if (path === '/version') return sendJson(res, 200, VERSION_INFO);
    if (path === '/api') return sendJson(res, 200, apiVersions(this.d.serverAddress()));
    if (path === '/apis') return sendJson(res, 200, apiGroupList(reg));
    if (path === '/openapi/v3') return sendJson(res, 200, openapiV3Index(reg));
    if (path === '/openapi/v2') {
      if ((req.headers.accept ?? '').includes('protobuf')) {
        const doc = openapiV2Protobuf(reg);
        res.writeHead(200, { 'Content-Type': OPENAPI_V2_CONTENT_TYPE, 'Content-Length': doc.length });
        res.end(doc);
        return;
      }
      return sendJson(res, 200, openapiV2Json(reg));
    }
    const ssr = SELF_SUBJECT_REVIEW_PATH.exec(path);
    if (ssr && method === 'POST') {
      const body = isProtobufBody(req.headers['content-type']) ? decodeProtobufBody(await readBodyBytes(req)) : parseJson(await readBody(req));
      const r = selfSubjectReview(ssr[1]!, body, user);
      return sendReply(req, res, r.code, r.body, []);
    }
    const oa = path.match(/^\/openapi\/v3\/(?:api\/(v1)|apis\/([^/]+)\/([^/]+))$/);
    if (oa) {
      const doc = oa[1] ? openapiV3Doc(reg, '', 'v1') : openapiV3Doc(reg, oa[2]!, oa[3]!);
      if (doc) return sendJson(res, 200, doc);
    }
    const m = path.match(/^\/(?:api\/(v1)|apis\/([^/]+)\/([^/]+))(?:\/(.*))?$/);
    const g = path.match(/^\/apis\/([^/]+)$/);
    if (g) {
      const group = apiGroupList(reg)['groups'] as Obj[];
      const found = group.find((x) => x['name'] === g[1]);
      if (found) return sendJson(res, 200, { kind: 'APIGroup', apiVersion: 'v1', ...found });
    }
    if (!m) return sendJson(res, 404, new ApiError(404, 'NotFound', 'the server could not find the requested resource').toStatus());
    const group = m[1] ? '' : m[2]!;
    const version = m[1] ?? m[3]!;
    const rest = m[4] ? m[4].split('/').map(decodeURIComponent) : [];
    if (rest.length === 0) {
      const list = apiResourceList(reg, group, version);
      if (list) return sendJson(res, 200, list);
      return sendJson(res, 404, new ApiError(404, 'NotFound', 'the server could not find the requested resource').toStatus());
    }
    const parsed = parseResourcePath(reg, group, version, rest);
    if (!parsed) return sendJson(res, 404, new ApiError(404, 'NotFound', 'the server could not find the requested resource').toStatus());
    const scope: RequestScope = { ...parsed, user, query, warnings: [], userAgent: req.headers['user-agent'] ?? '' };
    const verb = requestVerb(method, scope);
    const failWith = this.d.faults.errorFor(user.username, verb);
    if (failWith === 500) return sendJson(res, 500, errors.internal('injected fault').toStatus());
    if (failWith === 429) return sendJson(res, 429, errors.tooManyRequests('Too many requests, please try again later.').toStatus());
    let reply: Reply | undefined;
    try {
      this.d.access?.authorize(user, verb, scope);
      reply = this.d.access?.isReview(scope) ? this.d.access.review(user, verb, scope, await readJsonOrProtobuf(req)) : await this.serve(req, res, verb, scope);
    } catch (e) {
      if (WRITE_VERBS.has(verb)) this.record(verb, scope, e instanceof ApiError ? e.code : 500, undefined);
      if (e instanceof ApiError) {
        sendJson(res, e.code, e.toStatus(), scope.warnings);
        return;
      }
      throw e;
    }
    if (!reply) return;
    if (WRITE_VERBS.has(verb)) this.record(verb, scope, reply.code, reply.body);
    sendReply(req, res, reply.code, reply.body, scope.warnings);
  }

  private record(verb: string, s: RequestScope, code: number, body: unknown): void {
    const meta = isPlainObject(body) && isPlainObject(body['metadata']) ? body['metadata'] : undefined;
    const rv = meta ? String(meta['resourceVersion'] ?? '') : '';
    // A create's URL has no name (POST to the collection): take it from the created object.
    const name = s.name || (meta && typeof meta['name'] === 'string' ? meta['name'] : '');
    this.d.audit.record({
      verb, resource: s.def.resource, subresource: s.subresource, namespace: s.def.namespaced ? s.namespace : '', name,
      user: s.user.username, resourceVersion: rv, code, time: new Date().toISOString(),
      ...(s.auditAnnotations ? { annotations: { ...s.auditAnnotations } } : {}),
    });
  }

  private async serve(req: IncomingMessage, res: ServerResponse, verb: string, s: RequestScope): Promise<Reply | undefined> {
    const c = this.d.cluster;
    const accept = req.headers.accept;
    const includeObject = s.query.get('includeObject') ?? 'PartialObjectMetadata';
    const body = (): Promise<unknown> => readObjectBody(req, s);
    if (NO_RUNTIME.has(s.subresource)) {
      c.get({ ...s, subresource: '' }); // 404 for a missing pod, as kube
      throw noRuntime(s);
    }
    if (s.subresource === 'scale') return serveScale(c, s, verb, { object: body, raw: () => readBody(req), contentType: req.headers['content-type'] ?? '' });
    switch (verb) {
      case 'get': {
        const o = c.get(s);
        return { code: 200, body: wantsTable(accept) ? toTable(s.def, [o], { resourceVersion: meta(o).resourceVersion }, includeObject) : o };
      }
      case 'list': {
        const list = c.list(s);
        if (!wantsTable(accept)) return { code: 200, body: list };
        const items = c.list({ ...s, def: { ...s.def, builtin: false } })['items'] as Obj[];
        return { code: 200, body: toTable(s.def, items, list['metadata'] as Obj, includeObject) };
      }
      case 'watch': {
        const table = wantsTable(accept);
        const w = serveWatch(c, s, res, table ? {
          bookmarkIntervalMs: this.d.bookmarkIntervalMs,
          render: (def, o) => toTable(def, [o], { resourceVersion: meta(o).resourceVersion }, includeObject),
        } : { bookmarkIntervalMs: this.d.bookmarkIntervalMs }, () => this.watches.delete(w));
        if (!res.writableEnded) this.watches.add(w);
        return undefined;
      }
      case 'create':
        if (s.subresource === 'eviction') {
          return evict(c, s, await body(), async (eviction) => {
            await this.admitEviction(s, eviction);
          });
        }
        if (s.name) throw errors.methodNotAllowed();
        return c.create(s, await body());
      case 'update':
        if (!s.name) throw errors.methodNotAllowed();
        return c.update(s, await body());
      case 'patch':
        if (!s.name) throw errors.methodNotAllowed();
        return c.patch(s, await readBody(req), req.headers['content-type'] ?? '');
      case 'delete':
        return c.delete(s, await body());
      case 'deletecollection': {
        const opts = await body();
        const list = c.list(s)['items'] as Obj[];
        for (const o of list) {
          const m = meta(o);
          await c.delete({ ...s, namespace: m.namespace ?? '', name: m.name ?? '' }, opts);
        }
        return { code: 200, body: { ...c.list({ ...s, query: new URLSearchParams() }), items: list } };
      }
      default:
        throw errors.methodNotAllowed();
    }
  }

  private async admitEviction(s: RequestScope, eviction: Obj): Promise<void> {
    await this.d.cluster.admitSubresource(s, 'CREATE', eviction, { group: 'policy', version: 'v1', kind: 'Eviction' });
  }
}
