/**
 * Writes the reports of one API (`--report-api`: openreports.io Report /
 * ClusterReport or wgpolicyk8s.io PolicyReport / ClusterPolicyReport;
 * leader-only) and keeps the observed ones (every replica watches them,
 * label-selected on `app.kubernetes.io/managed-by=portal`), so a write
 * happens only when the desired content differs from what is stored
 * (`reportContentEqual`), and a new leader rewrites nothing its predecessor
 * already got right. Pacing and coalescing are the ReportFlusher's; this
 * class sends one write when asked.
 *
 * The observed cache is fed by the informers and by this writer's own
 * responses, newest resourceVersion wins: a watch event that lags behind our
 * own write must not make us think the old content is still stored.
 */
import type { Logger } from 'pino';
import { apiStatusCode, callOptions, describeApiError, type KubeClient } from '../kube/client.ts';
import type { FencedWriter } from '../kube/fenced-writer.ts';
import { ResilientInformer, stripManagedFields, type InformerEvent } from '../kube/informer.ts';
import type { LeaderTerm } from '../util/leader-term.ts';
import { ErrorCode, PortalError, isPortalError, toError } from '../observability/errors.ts';
import type { KubeObject } from '../policy/types.ts';
import { reportKey, type ReportIdentity } from '../policy/report.ts';
import { MANAGED_BY_LABEL, MANAGED_BY_VALUE, REPORT_API_INFO, REPORT_APIS, type ReportApi, type ReportApiInfo } from '../policy/report-api.ts';
import { reportContentEqual } from '../policy/report-compare.ts';
import type { Report } from '../policy/report-shape.ts';
import { LogKey } from '../observability/log-keys.ts';

export type ReportWrite = 'created' | 'updated' | 'deleted' | 'unchanged';

function cacheKey(namespace: string, name: string): string {
  return reportKey({ namespace, name });
}

const MANAGED = `${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE}`;

/** resourceVersions are opaque, but every real server uses integers; compare them when both are. */
function newer(a: string | undefined, b: string | undefined): boolean {
  if (a === undefined) return false;
  if (b === undefined) return true;
  if (/^\d+$/.test(a) && /^\d+$/.test(b)) return BigInt(a) >= BigInt(b);
  return true;
}

export class ReportWriter {
  readonly api: ReportApiInfo;
  readonly reports: ResilientInformer<KubeObject>;
  readonly clusterReports: ResilientInformer<KubeObject>;
  readonly #client: KubeClient;
  readonly #writer: FencedWriter;
  readonly #logger: Logger;
  readonly #observed = new Map<string, Report>();
  /** Writes that succeeded, by outcome (for tests, bench and /debug/vars). */
  readonly writes: Record<ReportWrite, number> = { created: 0, updated: 0, deleted: 0, unchanged: 0 };
  /** Reports deleted in the other API (after a switch of --report-api). */
  purged = 0;

  /** `writer`: the replica's leader-only writer, which sends every create, replace and delete. */
  constructor(client: KubeClient, writer: FencedWriter, logger: Logger, options: { api: ReportApi; staleAfterMs?: number }) {
    this.#client = client;
    this.#writer = writer;
    this.#logger = logger.child({ [LogKey.subcomponent]: 'report-writer' });
    this.api = REPORT_API_INFO[options.api];
    const { group, version, apiVersion, namespaced, cluster } = this.api;
    // managedFields are not content (reportContentEqual ignores them): not kept, as in the audit's object caches.
    const common = { apiVersion, labelSelector: MANAGED, transform: stripManagedFields, ...(options.staleAfterMs !== undefined ? { staleAfterMs: options.staleAfterMs } : {}) };
    this.reports = new ResilientInformer(client, { ...common, name: namespaced.plural, path: `/apis/${group}/${version}/${namespaced.plural}`, kind: namespaced.kind }, logger);
    this.clusterReports = new ResilientInformer(client, { ...common, name: cluster.plural, path: `/apis/${group}/${version}/${cluster.plural}`, kind: cluster.kind }, logger);
    this.reports.onEvent((e) => this.#observe(e));
    this.clusterReports.onEvent((e) => this.#observe(e));
  }

  async start(signal: AbortSignal): Promise<void> {
    await Promise.all([this.reports.start(signal), this.clusterReports.start(signal)]);
  }

  synced(): boolean {
    return this.reports.hasSynced() && this.clusterReports.hasSynced();
  }

  observed(namespace: string, name: string): Report | undefined {
    return this.#observed.get(cacheKey(namespace, name));
  }

  /** Every observed report (a snapshot), by key. */
  observedReports(): Array<[string, Report]> {
    return [...this.#observed];
  }

  get size(): number {
    return this.#observed.size;
  }

  #observe(event: InformerEvent<KubeObject>): void {
    const r = event.object as unknown as Report;
    const key = cacheKey(r.metadata?.namespace ?? '', r.metadata?.name ?? '');
    if (event.type === 'delete') {
      this.#observed.delete(key);
      return;
    }
    this.#remember(key, r);
  }

  #remember(key: string, r: Report): void {
    const current = this.#observed.get(key);
    if (!current || newer(r.metadata.resourceVersion, current.metadata.resourceVersion)) this.#observed.set(key, stripManagedFields(r as unknown as KubeObject) as unknown as Report);
  }

  /**
   * Makes the stored report for (namespace, name) equal to `desired`
   * (`undefined` = delete it). Throws PortalError(TermExpired) when fenced,
   * Kube on API errors (the work queue retries).
   */
  async apply(identity: ReportIdentity, desired: Report | undefined, term: LeaderTerm, signal: AbortSignal): Promise<ReportWrite> {
    const key = cacheKey(identity.namespace, identity.name);
    let current = this.#observed.get(key);
    const wco = this.#writer.customObjects;
    const { group: GROUP, version: VERSION } = this.api;
    const ns = identity.namespace;
    const plural = ns ? this.api.namespaced.plural : this.api.cluster.plural;
    const opts = callOptions({ signal, timeoutMs: 10_000 });
    const informer = ns ? this.reports : this.clusterReports;
    if (!current && !informer.ready()) {
      // Absent from a cache whose watch is not running (yet, e.g. right after a takeover, or again):
      // it may exist all the same. Read it rather than try a create that is likely to conflict.
      try {
        current = await this.#read(identity, plural, opts);
        this.#remember(key, current);
      } catch (err) {
        if (signal.aborted) throw err;
        if (apiStatusCode(err) !== 404) throw new PortalError(ErrorCode.Kube, `${identity.kind} ${key}: ${describeApiError(err)}`, { cause: err });
      }
    }
    if (reportContentEqual(current, desired)) return this.#count('unchanged');
    // Writes go through the FencedWriter (fenced again at the socket); every write is also conditional:
    // create fails if the report exists, replace and delete carry the resourceVersion observed.
    const writeOpts = this.#writer.options(term, { signal, timeoutMs: 10_000 });
    try {
      if (!desired) {
        await this.#fence(term, signal);
        const rv = current?.metadata.resourceVersion;
        const body = rv !== undefined ? { preconditions: { resourceVersion: rv } } : {};
        if (ns) await wco.deleteNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural, name: identity.name, body }, writeOpts);
        else await wco.deleteClusterCustomObject({ group: GROUP, version: VERSION, plural, name: identity.name, body }, writeOpts);
        this.#observed.delete(key);
        return this.#count('deleted');
      }
      for (let attempt = 0; attempt < 2; attempt++) {
        await this.#fence(term, signal);
        let stored: Report;
        if (!current) {
          try {
            stored = ns
              ? ((await wco.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural, body: desired }, writeOpts)) as Report)
              : ((await wco.createClusterCustomObject({ group: GROUP, version: VERSION, plural, body: desired }, writeOpts)) as Report);
          } catch (err) {
            if (isPortalError(err) || apiStatusCode(err) !== 409) throw err;
            // Stored already (our cache lags): read it and compare again.
            current = await this.#read(identity, plural, opts);
            this.#remember(key, current);
            if (reportContentEqual(current, desired)) return this.#count('unchanged');
            continue;
          }
          this.#remember(key, stored);
          return this.#count('created');
        }
        // PUT requires the resourceVersion, and it makes the replace conditional on the report being as observed.
        const body = { ...desired, metadata: { ...desired.metadata, resourceVersion: current.metadata.resourceVersion } };
        stored = ns
          ? ((await wco.replaceNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural, name: identity.name, body }, writeOpts)) as Report)
          : ((await wco.replaceClusterCustomObject({ group: GROUP, version: VERSION, plural, name: identity.name, body }, writeOpts)) as Report);
        this.#remember(key, stored);
        return this.#count('updated');
      }
      throw new PortalError(ErrorCode.Kube, `${identity.kind} ${key}: could not create or update`);
    } catch (err) {
      if (err instanceof PortalError) throw err;
      if (signal.aborted) throw err;
      const code = apiStatusCode(err);
      if (!desired && code === 404) {
        this.#observed.delete(key);
        return this.#count('deleted');
      }
      if (code === 404 && desired) {
        // The owner is gone (GC) or the report vanished: forget it; the next event decides.
        this.#observed.delete(key);
      }
      this.#logger.debug({ [LogKey.report]: key, [LogKey.error]: toError(err) }, 'report write failed');
      throw new PortalError(ErrorCode.Kube, `${identity.kind} ${key}: ${describeApiError(err)}`, { cause: err });
    }
  }

  /** The stored report, read from the API server (the cache may lag or not be watching). */
  async #read(identity: ReportIdentity, plural: string, opts: ReturnType<typeof callOptions>): Promise<Report> {
    const co = this.#client.customObjects;
    const { group, version } = this.api;
    const ns = identity.namespace;
    return (ns
      ? await co.getNamespacedCustomObject({ group, version, namespace: ns, plural, name: identity.name }, opts)
      : await co.getClusterCustomObject({ group, version, plural, name: identity.name }, opts)) as Report;
  }

  /** Checked right before each request (the FencedWriter checks again at the socket). */
  async #fence(term: LeaderTerm, signal: AbortSignal): Promise<void> {
    signal.throwIfAborted();
    term.assertValid();
  }

  /**
   * After a switch of `--report-api`: deletes the reports Portal wrote in
   * the other API (label-selected on managed-by=portal), each after
   * `take()` (the report write budget). An API whose CRDs are not installed
   * holds none. Returns how many it deleted; throws on API errors (the
   * caller retries).
   */
  async purgeOtherApi(term: LeaderTerm, signal: AbortSignal, take: (signal: AbortSignal) => Promise<void>): Promise<number> {
    const other = REPORT_API_INFO[REPORT_APIS.find((a) => a !== this.api.api)!];
    const { group, version } = other;
    let deleted = 0;
    for (const plural of [other.namespaced.plural, other.cluster.plural]) {
      let list: { items?: Report[] };
      try {
        list = (await this.#client.customObjects.listClusterCustomObject({ group, version, plural, labelSelector: MANAGED }, callOptions({ signal, timeoutMs: 30_000 }))) as { items?: Report[] };
      } catch (err) {
        if (signal.aborted) throw err;
        // The other API is not installed (404): nothing of ours there.
        if (apiStatusCode(err) === 404) continue;
        throw new PortalError(ErrorCode.Kube, `list ${plural}.${group}: ${describeApiError(err)}`, { cause: err });
      }
      for (const r of list.items ?? []) {
        await take(signal);
        await this.#fence(term, signal);
        const name = r.metadata.name;
        const ns = r.metadata.namespace ?? '';
        const rv = r.metadata.resourceVersion;
        const body = rv !== undefined ? { preconditions: { resourceVersion: rv } } : {};
        const writeOpts = this.#writer.options(term, { signal, timeoutMs: 10_000 });
        try {
          if (ns) await this.#writer.customObjects.deleteNamespacedCustomObject({ group, version, namespace: ns, plural, name, body }, writeOpts);
          else await this.#writer.customObjects.deleteClusterCustomObject({ group, version, plural, name, body }, writeOpts);
          deleted++;
          this.purged++;
        } catch (err) {
          if (err instanceof PortalError || signal.aborted) throw err;
          // Gone already (404) or changed since the list (409, someone else's now): not ours to retry.
          if (apiStatusCode(err) === 404 || apiStatusCode(err) === 409) continue;
          throw new PortalError(ErrorCode.Kube, `delete ${plural}.${group} ${reportKey({ namespace: ns, name })}: ${describeApiError(err)}`, { cause: err });
        }
      }
    }
    if (deleted > 0) this.#logger.info({ [LogKey.api]: other.apiVersion, [LogKey.deleted]: deleted }, 'deleted the reports Portal wrote in the other report API');
    return deleted;
  }

  #count(outcome: ReportWrite): ReportWrite {
    this.writes[outcome]++;
    return outcome;
  }
}
