/**
 * Which objects each PortalException exempts now, on every replica of the
 * audit (evaluator.ts): the exempted counts of the exceptions' status, the
 * start and end of each exemption (for the Events, exception-events.ts), and
 * the end of an exemption at its exception's expiresAt — by a timer rather
 * than at the next pass: the objects it exempts are enqueued then (the
 * evaluation judges them at that time, so without it), and the step learns
 * it (the exception's status: Expired).
 */
import type { Logger } from 'pino';
import { LogKey } from '../observability/log-keys.ts';
import type { RuleSet } from '../policy/index.ts';
import type { KubeObject } from '../policy/types.ts';
import type { ExemptionTransition } from './exception-events.ts';
import type { ObjectState } from './audit-step.ts';
import { parseObjectKey } from './work-queue.ts';

/** The longest a timer can wait (setTimeout's 32-bit bound); a later expiry re-arms. */
const MAX_TIMER_MS = 2 ** 31 - 1;

export interface ExemptionTrackerDeps {
  ruleSet: RuleSet;
  logger: Logger;
  /** An object started or stopped being exempted. */
  onExemption?: ((t: ExemptionTransition) => void) | undefined;
  /** Evaluates an object again. */
  enqueue(key: string): void;
  /** Exceptions (`namespace/name`) whose exempted count or expiry changed. */
  changed(displays: string[]): void;
}

export class ExemptionTracker {
  readonly #deps: ExemptionTrackerDeps;
  /** Exception `namespace/name` → keys of objects it exempts now. */
  readonly #exempting = new Map<string, Set<string>>();
  #timer: NodeJS.Timeout | undefined;

  constructor(deps: ExemptionTrackerDeps) {
    this.#deps = deps;
  }

  /** Objects the exception (`namespace/name`) exempts right now, as computed on this replica. */
  exempted(display: string): number {
    return this.#exempting.get(display)?.size ?? 0;
  }

  /** (Re-)arms the expiry timer for the next expiresAt; re-armed on every rule-set change and after each expiry. */
  arm(signal: AbortSignal | undefined): void {
    this.disarm();
    if (signal?.aborted) return;
    const now = Date.now();
    const next = this.#deps.ruleSet.nextExpiry(now);
    if (next === undefined) return;
    // +1: at `expiresAt` itself the exemption has ended (now >= expiresAt).
    this.#timer = setTimeout(() => this.#expired(signal), Math.min(next - now + 1, MAX_TIMER_MS));
    this.#timer.unref?.();
  }

  disarm(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #expired(signal: AbortSignal | undefined): void {
    const now = Date.now();
    const changed: string[] = [];
    for (const s of this.#deps.ruleSet.exceptionStates()) {
      if (s.expiresAt === undefined || s.expiresAt > now) continue;
      changed.push(s.display);
      for (const key of this.#exempting.get(s.display) ?? []) this.#deps.enqueue(key);
    }
    if (changed.length > 0) {
      this.#deps.logger.info({ [LogKey.exceptions]: changed }, 'exceptions expired: their objects are evaluated again');
      this.#deps.changed(changed);
    }
    this.arm(signal);
  }

  /**
   * Keeps exception → exempted objects current, tells the step whose count
   * changed, and reports each start and end of an exemption (not the end
   * that comes from the object's deletion).
   */
  track(key: string, prev: ObjectState | undefined, now: ReadonlyMap<string, readonly string[]> | undefined, object: KubeObject | undefined, version: string): void {
    const before = prev?.exempted;
    if (!before && !now) return;
    const changed: string[] = [];
    const target = object ?? prev?.object;
    const { group, kind, namespace, name } = parseObjectKey(key);
    const transition = (display: string, rules: readonly string[], started: boolean, why?: string): void => {
      if (!this.#deps.onExemption || !target) return;
      const st = this.#deps.ruleSet.exceptionState(`PortalException/${display}`);
      const slash = display.indexOf('/');
      this.#deps.onExemption({
        exception: { namespace: display.slice(0, slash), name: display.slice(slash + 1), uid: st?.uid, generation: st?.generation ?? 0 },
        object: { gvk: { group, version, kind }, namespace, name, uid: target.metadata?.uid },
        rules,
        started,
        ...(why ? { why } : {}),
      });
    };
    for (const [display, rules] of now ?? []) {
      if (before?.has(display)) continue;
      let set = this.#exempting.get(display);
      if (!set) this.#exempting.set(display, (set = new Set()));
      set.add(key);
      changed.push(display);
      transition(display, rules, true);
    }
    for (const [display, rules] of before ?? []) {
      if (now?.has(display)) continue;
      const set = this.#exempting.get(display);
      set?.delete(key);
      if (set?.size === 0) this.#exempting.delete(display);
      changed.push(display);
      if (object) transition(display, rules, false, this.#endReason(display));
    }
    if (changed.length > 0) this.#deps.changed(changed);
  }

  #endReason(display: string): string {
    const st = this.#deps.ruleSet.exceptionState(`PortalException/${display}`);
    if (!st) return 'the exception was deleted';
    if (!st.valid) return 'the exception is invalid';
    if (st.expiresAt !== undefined && st.expiresAt <= Date.now()) return `the exception expired at ${new Date(st.expiresAt).toISOString()}`;
    return 'the exception or the object changed and it no longer applies';
  }
}
