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
import { decodeObject, encodeObject, PROTOBUF_MEDIA_TYPE, ProtobufError, UnsupportedKind } from './protobuf/codec.ts';
import { isProtobufBody, wantsProtobuf } from './protobuf/negotiate.ts';
import { OPENAPI_V2_CONTENT_TYPE, openapiV2Json, openapiV2Protobuf, openapiV3Doc, openapiV3Index } from './openapi.ts';
import { parseJsonBody, parseYamlBody } from './openapi/duplicates.ts';
import { isScalable, serveScale } from './scale.ts';
import { SELF_SUBJECT_REVIEW_PATH, selfSubjectReview } from './whoami.ts';
import type { ResourceDef } from './registry.ts';
import { ApiError, errors } from './status.ts';
import { toTable, wantsTable } from './table.ts';
import { isPlainObject, meta, type Obj, type UserInfo } from './types.ts';
import { serveWatch, type ActiveWatch } from './watch.ts';
import { EPHEMERAL_CONTAINERS, servesEphemeralContainers } from './ephemeral-containers.ts';
import { LogKey } from '../../../../src/observability/log-keys.ts';
import { toError } from '../../../../src/observability/errors.ts';

/** kube-apiserver's request body limit (3 MiB). */
const MAX_BODY = 3 * 1024 * 1024;
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

function warningHeader(w: string): string {
  // Node refuses non-latin1 characters in header values; kube-apiserver sends
  // the warning's raw UTF-8 bytes, so do the same (each byte as one latin1 char).
  const text = `299 - "${w.replace(/[\\"]/g, (c) => `\\${c}`).replace(/[\r\n]/g, ' ')}"`;
  return Buffer.from(text, 'utf8').toString('latin1');
}

export function sendJson(res: ServerResponse, code: number, body: unknown, warnings: string[] = []): void {
  send(res, code, body, warnings, undefined);
}

/** Answers in protobuf when the client asked for it first and the kind has a protobuf form (protobuf/negotiate.ts). */
function sendReply(req: IncomingMessage, res: ServerResponse, code: number, body: unknown, warnings: string[]): void {
  const proto = wantsProtobuf(req.headers.accept) && isPlainObject(body) ? encodeObject(body) : undefined;
  send(res, code, body, warnings, proto);
}

function send(res: ServerResponse, code: number, body: unknown, warnings: string[], proto: Uint8Array | undefined): void {
  if (res.headersSent || res.destroyed) return;
  // A string body makes Node send headers and body in one UTF-8 write, which
  // would re-encode the latin1 Warning bytes; a Buffer keeps them raw.
  const data = proto ?? Buffer.from(JSON.stringify(body), 'utf8');
  const headers: Record<string, string | string[] | number> = {
    'Content-Type': proto ? PROTOBUF_MEDIA_TYPE : 'application/json',
    'Content-Length': data.length,
    'Cache-Control': 'no-cache, private',
  };
  if (warnings.length) headers['Warning'] = warnings.map(warningHeader);
  if (code === 429 || code === 500) {
    const retry = isPlainObject(body) && isPlainObject(body['details']) ? body['details']['retryAfterSeconds'] : undefined;
    if (typeof retry === 'number') headers['Retry-After'] = String(retry);
  }
  res.writeHead(code, headers);
  res.end(data);
}

async function readBody(req: IncomingMessage): Promise<string> {
  return (await readBodyBytes(req)).toString('utf8');
}

function readBodyBytes(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        reject(new ApiError(413, 'RequestEntityTooLarge', 'Request entity too large: limit is 3145728'));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function parseJson(raw: string): unknown {
  if (!raw) return undefined;
  try {
    return JSON.parse(raw);
  } catch (e) {
    throw errors.badRequest(`couldn't get version/kind; json parse error: ${(e as Error).message}`);
  }
}

/** Pod subresources served by the kubelet, which `portal dev` does not have. */
const NO_RUNTIME = new Set(['log', 'exec', 'attach', 'portforward', 'proxy']);

function noRuntime(s: RequestScope): ApiError {
  return errors.badRequest(`portal dev has no container runtime: pods/${s.subresource} is not available (the Pod "${s.name}" is stored and admitted, never run)`);
}

/** A protobuf request body as its JSON object: 415 for a kind without a protobuf form, 400 for bad bytes. */
function decodeProtobufBody(bytes: Buffer): unknown {
  try {
    return decodeObject(bytes);
  } catch (e) {
    if (e instanceof UnsupportedKind) {
      throw new ApiError(415, 'UnsupportedMediaType', `the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (${e.message})`,
        { causes: [{ reason: 'UnsupportedMediaType', message: PROTOBUF_MEDIA_TYPE }] });
    }
    if (e instanceof ProtobufError) throw errors.badRequest(`the protobuf body cannot be decoded: ${e.message}`);
    throw e;
  }
}

/** A request body as an object (JSON or protobuf), for the review APIs. */
async function readJsonOrProtobuf(req: IncomingMessage): Promise<unknown> {
  if (isProtobufBody(req.headers['content-type'])) return decodeProtobufBody(await readBodyBytes(req));
  const raw = await readBody(req);
  try {
    return raw ? JSON.parse(raw) : undefined;
  } catch (e) {
    throw errors.badRequest(`couldn't get version/kind; json parse error: ${(e as Error).message}`);
  }
}

interface Parsed { def: ResourceDef; namespace: string; name: string; subresource: string }

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
    const parsed = this.parse(group, version, rest);
    if (!parsed) return sendJson(res, 404, new ApiError(404, 'NotFound', 'the server could not find the requested resource').toStatus());
    const scope: RequestScope = { ...parsed, user, query, warnings: [], userAgent: req.headers['user-agent'] ?? '' };
    const verb = this.verb(method, scope);
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

  private parse(group: string, version: string, rest: string[]): Parsed | undefined {
    const reg = this.d.cluster.registry;
    let namespace = '';
    let segs = rest;
    // /namespaces/{ns}/{resource}... except the namespaces resource itself (/namespaces/{name}[/status]).
    if (segs[0] === 'namespaces' && segs.length >= 3 && !(group === '' && (segs[2] === 'status' || segs[2] === 'finalize') && segs.length === 3)) {
      namespace = segs[1]!;
      segs = segs.slice(2);
    }
    const def = reg.get(group, version, segs[0]!);
    if (!def) return undefined;
    if (namespace && !def.namespaced) return undefined;
    const name = segs[1] ?? '';
    const subresource = segs[2] ?? '';
    if (segs.length > 3) return undefined;
    if (subresource === 'status' && !def.hasStatus) return undefined;
    if (subresource === 'eviction' && !def.hasEviction) return undefined;
    if (subresource === 'scale' && !isScalable(def)) return undefined;
    if (subresource === EPHEMERAL_CONTAINERS && !servesEphemeralContainers(def)) return undefined;
    if (NO_RUNTIME.has(subresource) && !(def.group === '' && def.resource === 'pods')) return undefined;
    const known = subresource === 'status' || subresource === 'eviction' || subresource === 'scale' || subresource === EPHEMERAL_CONTAINERS || NO_RUNTIME.has(subresource);
    if (subresource && !known) return undefined;
    return { def, namespace, name, subresource };
  }

  private verb(method: string, s: RequestScope): string {
    switch (method) {
      case 'GET':
        if (s.name) return 'get';
        return s.query.get('watch') === 'true' || s.query.get('watch') === '1' ? 'watch' : 'list';
      case 'POST': return 'create';
      case 'PUT': return 'update';
      case 'PATCH': return 'patch';
      case 'DELETE': return s.name ? 'delete' : 'deletecollection';
      default: return method.toLowerCase();
    }
  }

  private async serve(req: IncomingMessage, res: ServerResponse, verb: string, s: RequestScope): Promise<Reply | undefined> {
    const c = this.d.cluster;
    const accept = req.headers.accept;
    const includeObject = s.query.get('includeObject') ?? 'PartialObjectMetadata';
    const body = async (): Promise<unknown> => {
      if (isProtobufBody(req.headers['content-type'])) return decodeProtobufBody(await readBodyBytes(req));
      const raw = await readBody(req);
      if (!raw) return undefined;
      const yaml = /^application\/yaml\b/i.test(req.headers['content-type'] ?? '');
      const decoded = yaml ? parseYamlBody(raw) : parseJsonBody(raw);
      if (decoded.duplicates.length) s.duplicateFields = decoded.duplicates;
      return decoded.value;
    };
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
