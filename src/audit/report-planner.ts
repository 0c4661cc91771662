/**
 * Which report an object's results go to, and what that report should say
 * (adr/0012): one per object (`resource`) or one per namespace plus one for
 * the cluster (`namespace`), in the API of `--report-api`. The planner marks
 * reports dirty in the {@link ReportFlusher} and builds them when the flusher
 * asks, always from evaluation's current state, so a report written late is
 * never stale. A change to one object dirties at most one report (two when
 * the object replaced another of the same name: the old one's goes).
 */
import type { Verdict } from '../policy/types.ts';
import { buildNamespaceReport, buildResourceReport, namespaceReportIdentity, reportKey, resourceReference, resourceReportIdentity, type ReportIdentity, type ReportSubject } from '../policy/report.ts';
import { NAMESPACE_REPORT_NAME, REPORT_LABELS, type ReportApi, type ReportGranularity } from '../policy/report-api.ts';
import { reportContentEqual } from '../policy/report-compare.ts';
import type { Report } from '../policy/report-shape.ts';
import type { AuditEvaluator, ObjectState } from './evaluator.ts';
import type { ReportFlusher, ReportSource } from './report-flusher.ts';
import type { ReportWriter } from './report-writer.ts';
import { objectKey } from './work-queue.ts';

export interface ReportConfig {
  /** `--report-api`. */
  api: ReportApi;
  /** `--report-granularity`. */
  granularity: ReportGranularity;
  /** `--report-flush`. */
  flushMs: number;
  /** `--report-qps`. */
  qps: number;
  /** `--report-max-results` (namespace granularity). */
  maxResults: number;
  /** `--report-status-filter` (namespace granularity). */
  statusFilter: readonly Verdict[];
}

/** Evaluation's state as a report subject, or undefined when there is nothing to report. */
function subject(st: ObjectState): ReportSubject | undefined {
  if (st.deleted || st.verdicts.length === 0) return undefined;
  const ref = resourceReference(st.object);
  return ref ? { ref, verdicts: st.verdicts } : undefined;
}

/** The evaluation key of the object a stored resource report is about (its scope). */
function scopeKey(report: Report | undefined): string | undefined {
  const scope = report?.scope;
  if (!scope?.apiVersion || !scope.kind || !scope.name) return undefined;
  const slash = scope.apiVersion.indexOf('/');
  return objectKey(slash === -1 ? '' : scope.apiVersion.slice(0, slash), scope.kind, scope.namespace ?? '', scope.name);
}

export class ReportPlanner implements ReportSource {
  readonly #config: Readonly<ReportConfig>;
  readonly #evaluator: AuditEvaluator;
  readonly #writer: ReportWriter;
  #flusher: ReportFlusher | undefined;

  constructor(config: ReportConfig, deps: { evaluator: AuditEvaluator; writer: ReportWriter }) {
    this.#config = Object.freeze({ ...config, statusFilter: [...config.statusFilter] });
    this.#evaluator = deps.evaluator;
    this.#writer = deps.writer;
  }

  /** The flusher it marks reports dirty in (set once, by the actuator that owns both). */
  attach(flusher: ReportFlusher): void {
    this.#flusher = flusher;
  }

  /** Where the results of `st` go (its resource report, or its namespace's). */
  identityOf(st: ObjectState): ReportIdentity | undefined {
    if (this.#config.granularity === 'namespace') return namespaceReportIdentity(this.#config.api, st.object.metadata?.namespace ?? '');
    const ref = resourceReference(st.object);
    return ref ? resourceReportIdentity(this.#config.api, ref) : undefined;
  }

  /** After an evaluation on the leader: marks the object's report dirty when what it says about the object changed. */
  touch(key: string, st: ObjectState): void {
    if (!st.reportChanged) return;
    const id = this.identityOf(st);
    if (id) this.#flusher?.touch(id, key);
    if (this.#config.granularity === 'resource' && st.replacedUid !== undefined) {
      const ns = st.object.metadata?.namespace ?? '';
      this.#flusher?.touch(resourceReportIdentity(this.#config.api, { apiVersion: '', kind: '', name: '', uid: st.replacedUid, ...(ns ? { namespace: ns } : {}) }));
    }
  }

  /** ReportSource: the report `id` should be now. */
  desired(id: ReportIdentity, hint: string | undefined, previous: Report | undefined, epoch: string): Report | undefined {
    const { api } = this.#config;
    const now = new Date();
    const currentAsOf = this.#evaluator.currentAsOf();
    if (this.#config.granularity === 'namespace') {
      // Anything else in this API (a resource report left from before a switch) goes.
      if (id.name !== NAMESPACE_REPORT_NAME) return undefined;
      const subjects: ReportSubject[] = [];
      for (const st of this.#evaluator.objectsIn(id.namespace)) {
        const s = subject(st);
        if (s) subjects.push(s);
      }
      return buildNamespaceReport(id.namespace, subjects, { api, now, epoch, previous, currentAsOf, limits: { maxResults: this.#config.maxResults, statusFilter: [...this.#config.statusFilter] } });
    }
    const key = hint ?? scopeKey(previous);
    const st = key === undefined ? undefined : this.#evaluator.objectState(key);
    // The object is gone, or this report is about another object of that name (replaced): none.
    if (!st || st.uid !== id.name) return undefined;
    const s = subject(st);
    return s ? buildResourceReport(s, { api, now, epoch, previous, currentAsOf }) : undefined;
  }

  /**
   * ReportSource: writes may start once the stored reports have been listed
   * and, for namespace reports (which sum up every object), once a full pass
   * has evaluated every audited kind, so no report is written from half a
   * namespace.
   */
  ready(): boolean {
    return this.#evaluator.observedSynced() && (this.#config.granularity === 'resource' || this.#evaluator.completePasses > 0);
  }

  /**
   * Marks every report that differs from what evaluation computed (the
   * takeover, and after each full pass): reports missing or stale, and
   * reports this API holds that should not exist (an object or namespace
   * gone, or the other granularity's after a switch). Yields to the event
   * loop every `slice` objects. Returns how many it marked.
   */
  async reconcile(epoch: string, signal: AbortSignal, slice = 500): Promise<number> {
    const flusher = this.#flusher;
    if (!flusher) return 0;
    const wanted = new Set<string>();
    let marked = 0;
    let seen = 0;
    const check = (id: ReportIdentity, hint: string | undefined) => {
      const k = reportKey(id);
      if (wanted.has(k)) return;
      wanted.add(k);
      const previous = this.#writer.observed(id.namespace, id.name);
      const desired = this.desired(id, hint, previous, epoch);
      if (desired === undefined) wanted.delete(k);
      if (!reportContentEqual(previous, desired)) {
        flusher.touch(id, hint);
        marked++;
      }
    };
    for (const [key, st] of this.#evaluator.objects()) {
      if (signal.aborted) return marked;
      if (!st.deleted) {
        const id = this.identityOf(st);
        if (id) check(id, key);
      }
      if (++seen % slice === 0) await new Promise((r) => setImmediate(r));
    }
    // Only with a complete view can a stored report be known to be one too many.
    if (!this.#evaluator.synced()) return marked;
    for (const [k, r] of this.#writer.observedReports()) {
      if (wanted.has(k)) continue;
      const namespace = r.metadata?.namespace ?? '';
      const name = r.metadata?.name ?? '';
      const granularity = r.metadata?.labels?.[REPORT_LABELS.granularity];
      // Reports written before issue 20 carry no granularity label: they were resource reports.
      const id: ReportIdentity = { kind: r.kind, namespace, name };
      if (granularity === this.#config.granularity || (granularity === undefined && this.#config.granularity === 'resource')) {
        if (this.desired(id, undefined, r, epoch) !== undefined) continue;
      }
      flusher.touch(id);
      marked++;
    }
    return marked;
  }
}
