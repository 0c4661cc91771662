/** Shared helpers for the embedded API server tests: raw HTTP calls with a user token. */
import { startApiServer, type ApiServer, type ApiServerOptions } from '../../packages/devcluster/src/apiserver/index.ts';

export interface Call { status: number; body: Record<string, unknown>; headers: Headers }

export function caller(server: ApiServer, token: string) {
  return async (method: string, path: string, body?: unknown, contentType = 'application/json', headers: Record<string, string> = {}): Promise<Call> => {
    const init: RequestInit = { method, headers: { Authorization: `Bearer ${token}`, 'Content-Type': contentType, ...headers } };
    if (body !== undefined) init.body = typeof body === 'string' ? body : JSON.stringify(body);
    const res = await fetch(`${server.url}${path}`, init);
    const text = await res.text();
    return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {}, headers: res.headers };
  };
}

export async function withServer(opts: ApiServerOptions, fn: (s: ApiServer) => Promise<void>): Promise<void> {
  const s = await startApiServer(opts);
  try {
    await fn(s);
  } finally {
    await s.close();
  }
}

/** Reads newline-delimited watch events until `until` returns true or the deadline passes. */
export async function readWatch(url: string, token: string, until: (events: Record<string, unknown>[]) => boolean, ms = 5000): Promise<Record<string, unknown>[]> {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), ms);
  const events: Record<string, unknown>[] = [];
  try {
    const res = await fetch(url, { headers: { Authorization: `Bearer ${token}` }, signal: ac.signal });
    const reader = res.body!.getReader();
    const dec = new TextDecoder();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let i: number;
      while ((i = buf.indexOf('\n')) >= 0) {
        events.push(JSON.parse(buf.slice(0, i)) as Record<string, unknown>);
        buf = buf.slice(i + 1);
      }
      if (until(events)) break;
    }
  } catch (e) {
    // Aborted by us, or the server cut the stream ("terminated"): both end the watch.
    if ((e as Error).name !== 'AbortError' && (e as Error).message !== 'terminated') throw e;
  } finally {
    clearTimeout(timer);
    ac.abort();
  }
  return events;
}
