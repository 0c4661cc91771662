/**
 * Watch streams: newline-delimited JSON events over a chunked response,
 * resuming from a resourceVersion (410 Expired when it is older than the
 * retained history), synthetic ADDED events for RV unset/"0", periodic
 * bookmarks, timeoutSeconds, and selector transitions (an object that stops
 * matching is sent as DELETED, one that starts matching as ADDED).
 */
import type { ServerResponse } from 'node:http';
import { present, type Cluster, type RequestScope } from './cluster.ts';
import { groupVersion, storeKey, type ResourceDef } from './registry.ts';
import { errors } from './status.ts';
import type { StoreEvent } from './store.ts';
import { meta, type Obj } from './types.ts';

export interface WatchOptions {
  bookmarkIntervalMs: number;
  /**
   * Converts an object for the wire (e.g. to a Table row). Omitted = the
   * object itself, and then each event is serialised once for all watchers.
   */
  render?: (def: ResourceDef, o: Obj) => unknown;
}

export interface ActiveWatch {
  user: string;
  close(): void;
}

/**
 * The event a watcher that selects `selected` sees for a store event: an
 * update that moves an object into the selection is ADDED, out of it DELETED
 * (as kube-apiserver's filtered watches).
 */
function watchEventType(ev: StoreEvent, selected: (o: Obj) => boolean): string | undefined {
  const now = selected(ev.object);
  const before = ev.old !== undefined && selected(ev.old);
  if (ev.type === 'ADDED') return now ? 'ADDED' : undefined;
  if (ev.type === 'DELETED') return before ? 'DELETED' : undefined;
  if (now && before) return 'MODIFIED';
  if (now) return 'ADDED';
  return before ? 'DELETED' : undefined;
}

/**
 * The events before the live ones: the current objects (no resourceVersion,
 * 0, or sendInitialEvents), else the store's history since the given one.
 * False after an ERROR event, when that history cannot be served.
 */
function replay(cluster: Cluster, s: RequestScope, rvParam: string | null, added: (o: Obj) => void, send: (type: string, object: unknown) => void, emit: (ev: StoreEvent) => void): boolean {
  const def = s.def;
  const initial = s.query.get('sendInitialEvents') === 'true';
  if (!rvParam || rvParam === '0' || initial) {
    for (const o of cluster.store.list(storeKey(def), def.namespaced && s.namespace ? s.namespace : undefined)) added(o);
    if (initial) {
      // Streaming lists (WatchListClient, on in kubectl 1.35): the end of the
      // initial events is a bookmark with this annotation.
      send('BOOKMARK', { kind: def.kind, apiVersion: groupVersion(def),
        metadata: { resourceVersion: String(cluster.store.currentRv()), annotations: { 'k8s.io/initial-events-end': 'true' } } });
    }
    return true;
  }
  const rv = Number(rvParam);
  if (!Number.isInteger(rv) || rv < 0) {
    send('ERROR', errors.badRequest(`invalid resource version: ${rvParam}`).toStatus());
    return false;
  }
  const backlog = cluster.store.since(storeKey(def), rv);
  if (!backlog) {
    send('ERROR', errors.expired(`too old resource version: ${rv} (${cluster.store.compactedRv() + 1})`).toStatus());
    return false;
  }
  for (const ev of backlog) emit(ev);
  return true;
}

export function serveWatch(cluster: Cluster, s: RequestScope, res: ServerResponse, opts: WatchOptions, onClose: () => void): ActiveWatch {
  const def = s.def;
  const match = cluster.filter(s);
  const inScope = (o: Obj): boolean => !def.namespaced || !s.namespace || meta(o).namespace === s.namespace;
  const rvParam = s.query.get('resourceVersion');
  const bookmarks = s.query.get('allowWatchBookmarks') === 'true';
  const timeout = Number(s.query.get('timeoutSeconds') ?? '0');

  res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked', 'Cache-Control': 'no-cache, private' });
  res.flushHeaders();
  let closed = false;
  const render = opts.render;
  const send = (type: string, object: unknown): void => {
    if (!closed) res.write(`${JSON.stringify({ type, object })}\n`);
  };
  const gv = groupVersion(def);
  const sendEvent = (type: string, ev: StoreEvent): void => {
    if (closed) return;
    if (render) {
      send(type, render(def, present(def, ev.object)));
      return;
    }
    const key = `${type} ${gv}`;
    ev.wire ??= new Map();
    let line = ev.wire.get(key);
    if (!line) {
      line = Buffer.from(`${JSON.stringify({ type, object: present(def, ev.object) })}\n`);
      ev.wire.set(key, line);
    }
    res.write(line);
  };
  const emit = (ev: StoreEvent): void => {
    const type = watchEventType(ev, (o) => inScope(o) && match(o));
    if (type) sendEvent(type, ev);
  };

  const timers: NodeJS.Timeout[] = [];
  let unsubscribe = (): void => {};
  const close = (): void => {
    if (closed) return;
    closed = true;
    unsubscribe();
    for (const t of timers) clearTimeout(t);
    res.end();
    onClose();
  };
  res.on('close', close);

  if (!replay(cluster, s, rvParam, (o) => match(o) && send('ADDED', render ? render(def, present(def, o)) : present(def, o)), send, emit)) {
    close();
    return { user: s.user.username, close };
  }
  unsubscribe = cluster.store.subscribe(storeKey(def), emit);
  if (bookmarks) {
    const tick = (): void => {
      send('BOOKMARK', { kind: def.kind, apiVersion: groupVersion(def), metadata: { resourceVersion: String(cluster.store.currentRv()) } });
      timers[0] = setTimeout(tick, opts.bookmarkIntervalMs);
    };
    timers[0] = setTimeout(tick, opts.bookmarkIntervalMs);
  }
  if (timeout > 0) timers.push(setTimeout(close, timeout * 1000));
  return { user: s.user.username, close };
}
