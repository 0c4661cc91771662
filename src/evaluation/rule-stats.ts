/**
 * The main thread's side of the per-rule admission counts (rule-stats-page.ts):
 * the pages of the pool's workers, announced on a BroadcastChannel, summed
 * at scrape time. A page whose worker is gone (replaced after a deadline) or
 * that its worker replaced is folded into `retired` first, so counters never
 * go back; what is kept of rules no longer in force is dropped at the next
 * read (`totals(inForce)`), so deleted rules cost nothing for long.
 */
import { randomUUID } from 'node:crypto';
import { BroadcastChannel } from 'node:worker_threads';
import type { Enforcement } from '../policy/types.ts';
import { PageReader, SLOT_VALUES, type SlotView } from './rule-stats-page.ts';

/** What a worker posts on the channel. */
export interface PageMessage {
  thread: number;
  page: SharedArrayBuffer;
}

/** One (rule, enforcement)'s counts: see rule-stats-page.ts for the layout of `values`. */
export interface RuleTotals {
  rule: string;
  enforcement: Enforcement;
  values: Float64Array;
}

/** `rule\0enforcement`: the identity of a series. */
export function seriesKey(rule: string, enforcement: Enforcement): string {
  return `${rule}\u0000${enforcement}`;
}

export class RuleStats {
  readonly channelName = `portal-rule-stats-${randomUUID()}`;
  readonly #channel: BroadcastChannel;
  readonly #pages = new Map<number, PageReader>();
  readonly #retired = new Map<string, RuleTotals>();
  /** Threads gone: a page they announced late is retired at once. */
  readonly #gone = new Set<number>();

  constructor() {
    const channel = new BroadcastChannel(this.channelName);
    channel.unref();
    channel.onmessage = (event: unknown) => {
      const m = (event as { data: PageMessage }).data;
      if (typeof m?.thread !== 'number' || !(m.page instanceof SharedArrayBuffer)) return;
      const previous = this.#pages.get(m.thread);
      if (previous !== undefined) this.#fold(previous);
      const reader = new PageReader(m.page);
      if (this.#gone.has(m.thread)) this.#fold(reader);
      else this.#pages.set(m.thread, reader);
    };
    this.#channel = channel;
  }

  /** A worker thread ended: its counts are kept, its page is let go. */
  workerGone(thread: number): void {
    const page = this.#pages.get(thread);
    this.#pages.delete(thread);
    if (page !== undefined) this.#fold(page);
    this.#gone.add(thread);
    // Only a late announcement needs the id; keep the last few.
    if (this.#gone.size > 256) this.#gone.delete(this.#gone.values().next().value as number);
  }

  /** Summed counts of the series `inForce` holds (seriesKey); everything else is forgotten. */
  totals(inForce: ReadonlySet<string>): RuleTotals[] {
    for (const key of this.#retired.keys()) if (!inForce.has(key)) this.#retired.delete(key);
    const out = new Map<string, RuleTotals>();
    for (const [key, t] of this.#retired) out.set(key, { rule: t.rule, enforcement: t.enforcement, values: t.values.slice() });
    for (const page of this.#pages.values()) for (const s of page.slots()) if (inForce.has(seriesKey(s.rule, s.enforcement))) add(out, s);
    return [...out.values()];
  }

  close(): void {
    this.#channel.close();
  }

  #fold(page: PageReader): void {
    for (const s of page.slots()) add(this.#retired, s);
  }
}

function add(into: Map<string, RuleTotals>, s: SlotView): void {
  const key = seriesKey(s.rule, s.enforcement);
  let t = into.get(key);
  if (t === undefined) into.set(key, (t = { rule: s.rule, enforcement: s.enforcement, values: new Float64Array(SLOT_VALUES) }));
  for (let i = 0; i < SLOT_VALUES; i++) t.values[i]! += s.values[s.base + i]!;
}
