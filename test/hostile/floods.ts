/**
 * What the connection-flood tests share (issue 31 items 3 and 4): clients
 * that hold connections by sending slowly from another loopback address (a
 * distinct peer), a flood of large reviews, and what to read of a replica.
 * (The victim is test/support/victim.ts; `portal dev`, test/dev/support.ts.)
 */
import { fork } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { Agent, request } from 'node:https';
import { connect as tcpConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { fileURLToPath } from 'node:url';
import type { TestContext } from 'node:test';

/** Peak resident set (VmHWM) of a process, in bytes. */
export async function peakRss(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? NaN) * 1024;
}

export interface SlowPlan {
  port: number;
  peer: string;
  count: number;
  tls: boolean;
  head: string;
  drip: string;
  everyMs: number;
}

export interface AttackPlan {
  slow: SlowPlan[];
  floods: { url: string; peer: string; concurrency: number; bytes: number; namespace: string }[];
}

export interface AttackReport {
  /** Connections each slow sender opened (first round and reconnections). */
  slowOpened: number[];
  /** Per flood, answers by HTTP status (0: the connection failed). */
  floodAnswers: Record<string, number>[];
}

/** Runs `plan` in a child process (flood-attacker.ts) until `stop()`; killed after the test whatever happens. */
export async function attack(t: TestContext, plan: AttackPlan): Promise<{ stop: () => Promise<AttackReport> }> {
  const child = fork(fileURLToPath(new URL('./flood-attacker.ts', import.meta.url)), { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  const next = (): Promise<unknown> =>
    new Promise((resolve, reject) => {
      child.once('message', resolve);
      child.once('exit', (code) => reject(new Error(`the attacker exited (${code}) before answering`)));
    });
  const started = next();
  child.send(plan);
  await started;
  return {
    stop: async () => {
      const report = next();
      child.send('stop');
      return (await report) as AttackReport;
    },
  };
}

export interface Holders {
  /** Connections opened, first round and reconnections. */
  opened: () => number;
  stop: () => void;
}

/**
 * `count` connections from `peer` to `port` that each send `head`, then one
 * byte of `drip` every `everyMs`; each one the server closes is opened again
 * (the attacker of issue 31), until `stop()`.
 */
export function slowSenders(o: SlowPlan): Holders {
  const live = new Set<Socket>();
  let stopped = false;
  let opened = 0;
  const open = (): void => {
    if (stopped) return;
    opened++;
    const raw = tcpConnect({ host: '127.0.0.1', port: o.port, localAddress: o.peer });
    const sock: Socket = o.tls ? tlsConnect({ socket: raw, rejectUnauthorized: false }) : raw;
    live.add(sock);
    let i = 0;
    let timer: NodeJS.Timeout | undefined;
    sock.on('error', () => {});
    sock.once(o.tls ? 'secureConnect' : 'connect', () => {
      sock.write(o.head);
      timer = setInterval(() => sock.write(o.drip.charAt(i++ % o.drip.length)), o.everyMs);
    });
    sock.once('close', () => {
      clearInterval(timer);
      live.delete(sock);
      raw.destroy();
      setTimeout(open, 50);
    });
  };
  for (let i = 0; i < o.count; i++) open();
  return {
    opened: () => opened,
    stop: () => {
      stopped = true;
      for (const s of live) s.destroy();
    },
  };
}

/** A CREATE review of a Pod carrying `bytes` of annotation, in `namespace` (the victim's: a forged review can name any). */
export function bigReview(uid: string, namespace: string, bytes: number): string {
  const pod = { apiVersion: 'v1', kind: 'Pod', metadata: { name: uid, namespace, annotations: { pad: 'x'.repeat(bytes) } }, spec: { containers: [{ name: 'app', image: 'nginx:1.27' }] } };
  return JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: { uid, kind: { group: '', version: 'v1', kind: 'Pod' }, resource: { group: '', version: 'v1', resource: 'pods' }, operation: 'CREATE', namespace, name: uid, userInfo: { username: 'mallory' }, object: pod, oldObject: null },
  });
}

export interface Flood {
  /** Answers by HTTP status (0: the connection failed). */
  answers: Map<number, number>;
  stop: () => Promise<void>;
}

/** `concurrency` clients from `peer`, each POSTing `body` to `url` again as soon as it is answered, until `stop()`. */
export function flood(url: string, peer: string, concurrency: number, body: string): Flood {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency, localAddress: peer, rejectUnauthorized: false });
  const answers = new Map<number, number>();
  let stopped = false;
  const one = (): Promise<void> =>
    new Promise((resolve) => {
      const req = request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }, timeout: 30_000 }, (res) => {
        res.resume();
        res.on('end', () => {
          answers.set(res.statusCode ?? 0, (answers.get(res.statusCode ?? 0) ?? 0) + 1);
          resolve();
        });
        res.on('error', () => resolve());
      });
      req.on('timeout', () => req.destroy());
      req.on('error', () => {
        answers.set(0, (answers.get(0) ?? 0) + 1);
        resolve();
      });
      req.end(body);
    });
  const loops = Array.from({ length: concurrency }, async () => {
    while (!stopped) await one();
  });
  return {
    answers,
    stop: async () => {
      stopped = true;
      await Promise.all(loops);
      agent.destroy();
    },
  };
}

