/**
 * After a switch of `--report-api`, the leader deletes the reports Portal
 * wrote in the other API, paced by the report budget, retried with backoff
 * until it succeeds once in the term.
 */
import type { Logger } from 'pino';
import type { LeaderTerm } from '../util/leader-term.ts';
import { ErrorCode, isPortalError, toError } from '../observability/errors.ts';
import { LogKey } from '../observability/log-keys.ts';
import { sleep } from '../util/backoff.ts';
import type { ReportWriter } from './report-writer.ts';

/** Backoff of the clean-up after a failure (it is retried for the whole term). */
const PURGE_RETRY_MS = [1000, 5000, 30_000] as const;

export async function purgeOtherApi(
  reports: Pick<ReportWriter, 'purgeOtherApi'>,
  term: LeaderTerm,
  signal: AbortSignal,
  take: (signal: AbortSignal) => Promise<void>,
  log: Logger,
  onDeleted: () => void,
): Promise<void> {
  for (let attempt = 0; !signal.aborted; attempt++) {
    try {
      const n = await reports.purgeOtherApi(term, signal, take);
      if (n > 0) onDeleted();
      return;
    } catch (err) {
      if (signal.aborted || isPortalError(err, ErrorCode.TermExpired)) return;
      log.warn({ [LogKey.error]: toError(err), [LogKey.attempt]: attempt }, 'deleting the reports of the other report API failed; retrying');
      await sleep(PURGE_RETRY_MS[Math.min(attempt, PURGE_RETRY_MS.length - 1)]!, signal).catch(() => {});
    }
  }
}
