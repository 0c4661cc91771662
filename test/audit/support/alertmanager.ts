/**
 * A real Alertmanager (Debian `prometheus-alertmanager`, v0.25) for contract
 * tests: started on a free loopback port with a null receiver, clustering
 * off, storage in a temporary directory; stopped and cleaned up by `close()`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ALERTMANAGER, requireTool } from '../../support/external-tool.ts';

export const ALERTMANAGER_BIN = ALERTMANAGER.command;

const CONFIG = `route:
  receiver: 'null'
  group_wait: 1s
receivers:
  - name: 'null'
`;

export interface RunningAlertmanager {
  url: string;
  /** GET /api/v2/alerts (active, silenced, inhibited and unprocessed alerts). */
  alerts(): Promise<Array<{ labels: Record<string, string>; annotations: Record<string, string>; startsAt: string; endsAt: string; status: { state: string } }>>;
  close(): Promise<void>;
}

/** A port that was free a moment ago (Alertmanager cannot report a port-0 choice back). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

async function waitReady(url: string, child: ChildProcess, deadlineMs: number): Promise<boolean> {
  const deadline = performance.now() + deadlineMs;
  while (performance.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) return false;
    try {
      const res = await fetch(`${url}/-/ready`, { signal: AbortSignal.timeout(1000) });
      if (res.ok) return true;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}

export async function startAlertmanager(): Promise<RunningAlertmanager> {
  requireTool(ALERTMANAGER);
  const dir = mkdtempSync(join(tmpdir(), 'portal-am-'));
  writeFileSync(join(dir, 'alertmanager.yml'), CONFIG);
  let lastOutput = '';
  // The free port can be taken between probe and bind: try a few times.
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    const child = spawn(ALERTMANAGER_BIN, [
      `--web.listen-address=127.0.0.1:${port}`,
      '--cluster.listen-address=',
      `--storage.path=${join(dir, 'data')}`,
      `--config.file=${join(dir, 'alertmanager.yml')}`,
      '--log.level=warn',
    ], { stdio: ['ignore', 'ignore', 'pipe'] });
    let output = '';
    child.stderr?.on('data', (d: Buffer) => (output = (output + d.toString()).slice(-4000)));
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    const url = `http://127.0.0.1:${port}`;
    if (await waitReady(url, child, 15_000)) {
      return {
        url,
        async alerts() {
          const res = await fetch(`${url}/api/v2/alerts`);
          if (!res.ok) throw new Error(`GET /api/v2/alerts: ${res.status}`);
          return (await res.json()) as Awaited<ReturnType<RunningAlertmanager['alerts']>>;
        },
        async close() {
          if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
          await exited;
          rmSync(dir, { recursive: true, force: true });
        },
      };
    }
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
    lastOutput = output;
  }
  rmSync(dir, { recursive: true, force: true });
  throw new Error(`alertmanager did not become ready: ${lastOutput}`);
}
