/** Shared helpers for the embedded API server tests: raw HTTP calls with a user token, and the real kubectl. */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { kubectlPath } from '../support/tools.ts';
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

const run = promisify(execFile);

/**
 * A TLS server and the real kubectl as its admin (`<dir>/kubeconfig`, HOME
 * `dir`): `k(...args)` resolves to kubectl's stdout, or throws with its
 * stderr.
 */
export async function withKubectl(fn: (k: (...args: string[]) => Promise<string>, dir: string, s: ApiServer) => Promise<void>): Promise<void> {
  await withServer({ plainHttp: false }, async (s) => {
    const dir = mkdtempSync(join(tmpdir(), 'portal-kubectl-'));
    try {
      const kubeconfig = join(dir, 'kubeconfig');
      writeFileSync(kubeconfig, s.kubeConfig('admin'));
      const k = async (...args: string[]): Promise<string> => {
        try {
          return (await run(kubectlPath(), ['--kubeconfig', kubeconfig, ...args], { env: { PATH: process.env['PATH'] ?? '', HOME: dir } })).stdout;
        } catch (e) {
          throw new Error(`kubectl ${args.join(' ')}: ${(e as { stderr?: string }).stderr ?? String(e)}`, { cause: e });
        }
      };
      await fn(k, dir, s);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
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
