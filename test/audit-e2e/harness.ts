/**
 * Helpers for the exactly-once e2e: a counting Alertmanager stand-in, polling
 * with a deadline, replica log tails, and pure checks over the embedded API
 * server's write log (`/_portal/audit`, oldest first, in the order the server
 * applied the writes).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { until as untilShared } from '../support/until.ts';

export interface AuditEntry {
  verb: string;
  resource: string;
  subresource: string;
  namespace: string;
  /** Empty for creates: the name is in the body, not the path. */
  name: string;
  user: string;
  /** Of the object the write returned ('' when it returned none). */
  resourceVersion: string;
  code: number;
  time: string;
}

export interface PostedAlert {
  labels: Record<string, string>;
  annotations?: Record<string, string>;
  endsAt: string;
}


/** A counting Alertmanager: records every POSTed alert with its arrival time (this machine's clock). */
export async function countingAlertmanager(): Promise<{ url: string; alerts: Array<PostedAlert & { at: number }>; server: Server }> {
  const alerts: Array<PostedAlert & { at: number }> = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method === 'POST' && req.url === '/api/v2/alerts') {
        for (const a of JSON.parse(Buffer.concat(chunks).toString('utf8')) as PostedAlert[]) alerts.push({ ...a, at: Date.now() });
        res.writeHead(200).end();
      } else if (req.method === 'GET' && req.url?.startsWith('/api/v2/alerts')) {
        // Active alerts, the latest per label set (what a successor asks to settle an unconfirmed intent).
        const latest = new Map<string, PostedAlert>();
        for (const a of alerts) latest.set(JSON.stringify(a.labels), { labels: a.labels, endsAt: a.endsAt });
        const now = Date.now();
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify([...latest.values()].filter((a) => Date.parse(a.endsAt) > now)));
      } else res.writeHead(404).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, alerts, server };
}

export const REPLICA_USER_PREFIX = 'system:serviceaccount:portal-system:';
export const replicaUser = (name: string): string => `${REPLICA_USER_PREFIX}${name}`;
/** Lease holder identity `<replica>_<suffix>` → replica name. */
export const replicaOf = (identity: string): string => identity.slice(0, identity.lastIndexOf('_'));

/** The report resources of both APIs (openreports.io, wgpolicyk8s.io). */
const REPORT_RESOURCES = new Set(['reports', 'clusterreports', 'policyreports', 'clusterpolicyreports']);

const ok = (e: AuditEntry): boolean => e.code < 300;
const byReplica = (e: AuditEntry): boolean => e.user.startsWith(REPLICA_USER_PREFIX);

/**
 * Writes only the leader may make: reports, rule and exception status, pod
 * patches (annotate), the ledger, Events on PortalExceptions (in their
 * namespace; leadership Events go to the Lease's). Replicas write ConfigMaps
 * only for the ledger, and a create's log entry has no name, so every
 * ConfigMap write by a replica counts.
 */
export function isLeaderOnly(e: AuditEntry): boolean {
  return (
    ok(e) &&
    byReplica(e) &&
    (REPORT_RESOURCES.has(e.resource) ||
      (e.resource === 'portalclusterrules' && e.subresource === 'status') ||
      (e.resource === 'portalexceptions' && e.subresource === 'status') ||
      (e.resource === 'events' && e.namespace !== 'portal-system') ||
      (e.resource === 'pods' && e.verb === 'patch') ||
      e.resource === 'configmaps')
  );
}

export function isLeaseWrite(e: AuditEntry): boolean {
  return ok(e) && e.resource === 'leases' && e.name === 'portal-leader' && (e.verb === 'update' || e.verb === 'create' || e.verb === 'patch');
}

/** Leader-only writes whose author is not the one that last wrote the Lease before them (log order). */
export function writesNotFromHolder(log: AuditEntry[]): { checked: number; offenders: AuditEntry[] } {
  let holder = '';
  let checked = 0;
  const offenders: AuditEntry[] = [];
  for (const e of log) {
    if (isLeaseWrite(e)) holder = e.user;
    else if (isLeaderOnly(e)) {
      checked++;
      if (e.user !== holder) offenders.push(e);
    }
  }
  return { checked, offenders };
}

/** Successful pod patches by replicas, by pod name (the rule's only pod write is its annotate merge patch). */
export function podPatchesByName(log: AuditEntry[], namespace: string): Map<string, AuditEntry[]> {
  const out = new Map<string, AuditEntry[]>();
  for (const e of log) {
    if (!ok(e) || !byReplica(e) || e.resource !== 'pods' || e.verb !== 'patch' || e.subresource !== '' || e.namespace !== namespace) continue;
    out.set(e.name, [...(out.get(e.name) ?? []), e]);
  }
  return out;
}

/** Successful namespaced report writes (either API) by replicas, split by verb. */
export function reportWrites(log: AuditEntry[], namespace: string): { creates: AuditEntry[]; rewrites: AuditEntry[]; deletes: AuditEntry[] } {
  const mine = log.filter((e) => ok(e) && byReplica(e) && (e.resource === 'reports' || e.resource === 'policyreports') && e.namespace === namespace);
  return {
    creates: mine.filter((e) => e.verb === 'create'),
    rewrites: mine.filter((e) => e.verb === 'update' || e.verb === 'patch'),
    deletes: mine.filter((e) => e.verb === 'delete' || e.verb === 'deletecollection'),
  };
}

/**
 * The takeover after `user` was paused at `pausedAt` (ms, this machine's
 * clock, which the in-process API server shares): the first successful Lease
 * write by anyone else at or after that moment. Its log index bounds the
 * paused leader's term on the server's own order of writes.
 */
export function takeoverAfter(log: AuditEntry[], user: string, pausedAt: number): { index: number; entry: AuditEntry } | undefined {
  const index = log.findIndex((e) => isLeaseWrite(e) && e.user !== user && Date.parse(e.time) >= pausedAt);
  const entry = log[index];
  return entry ? { index, entry } : undefined;
}

/** Leader-only writes (and Lease writes) by `user` after log index `from`. */
export function writesAfter(log: AuditEntry[], user: string, from: number): AuditEntry[] {
  return log.slice(from + 1).filter((e) => e.user === user && (isLeaderOnly(e) || isLeaseWrite(e)));
}

/** The last `chars` of every replica log under `logsDir` (for failure messages; '' when there are none). */
export async function replicaLogTails(logsDir: string, chars: number): Promise<string> {
  let names: string[];
  try {
    names = (await readdir(logsDir)).filter((n) => n.startsWith('portal-')).sort();
  } catch {
    return '';
  }
  const parts = await Promise.all(names.map(async (n) => `--- ${n} (tail) ---\n${(await readFile(join(logsDir, n), 'utf8').catch(() => '')).slice(-chars)}`));
  return parts.join('\n');
}

/** The suite's `until` (test/support/until.ts): a check that throws (a paused or killed replica) counts as "not yet". */
export const until = <T>(what: string, ms: number, check: () => Promise<T | undefined>): Promise<T> => untilShared(what, ms, check, { intervalMs: 100, ignoreErrors: true });
