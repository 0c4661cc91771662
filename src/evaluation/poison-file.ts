/**
 * The (rule, object) pairs that exhausted an evaluation thread's memory
 * (poison-pairs.ts), kept in a file of the replica's `--evaluation-state-dir`
 * so that a restarted replica does not pay a thread for each of them again
 * (adr/0018: why a local file, not a ConfigMap). Loaded before the pools
 * start; rewritten whole (at most MAX_PAIRS, a few hundred KiB) through a
 * temporary file and a rename whenever a pair is added, which is rare: each
 * cost a thread.
 */
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { LogKey } from '../observability/log-keys.ts';
import { toError } from '../observability/errors.ts';
import { MAX_PAIRS, type PoisonPair, type PoisonPairs } from './poison-pairs.ts';

export const POISON_FILE = 'evaluation-memory.json';

function isPair(p: unknown): p is PoisonPair {
  const o = p as Record<string, unknown> | null;
  return (
    typeof o === 'object' &&
    o !== null &&
    ['rule', 'ruleVersion', 'object', 'describe', 'at'].every((k) => typeof o[k] === 'string') &&
    typeof o['limitMiB'] === 'number'
  );
}

/** Adds the pairs of `dir`'s file to `pairs`; a missing file is an empty one, an unreadable one is logged and ignored (the pairs are found again, one thread each). */
export async function loadPoisonPairs(dir: string, pairs: PoisonPairs, log: Logger): Promise<number> {
  const file = join(dir, POISON_FILE);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') log.warn({ [LogKey.error]: toError(err), [LogKey.file]: file }, 'cannot read the remembered evaluation memory exhaustions; starting without them');
    return 0;
  }
  let stored: unknown;
  try {
    stored = JSON.parse(text);
  } catch (err) {
    log.warn({ [LogKey.error]: toError(err), [LogKey.file]: file }, 'the remembered evaluation memory exhaustions are not JSON; starting without them');
    return 0;
  }
  const list = Array.isArray((stored as { pairs?: unknown })?.pairs) ? (stored as { pairs: unknown[] }).pairs : [];
  let n = 0;
  for (const p of list.slice(-MAX_PAIRS)) if (isPair(p) && pairs.add(p)) n++;
  return n;
}

/** Rewrites `dir`'s file on every new pair until `signal` aborts; returns what waits for the last write. */
export function persistPoisonPairs(dir: string, pairs: PoisonPairs, log: Logger, signal: AbortSignal): () => Promise<void> {
  const file = join(dir, POISON_FILE);
  let chain: Promise<void> = Promise.resolve();
  let queued = false;
  const write = async (): Promise<void> => {
    queued = false;
    try {
      await mkdir(dir, { recursive: true });
      const tmp = `${file}.tmp`;
      await writeFile(tmp, `${JSON.stringify({ pairs: pairs.pairs() })}\n`);
      await rename(tmp, file);
    } catch (err) {
      log.warn({ [LogKey.error]: toError(err), [LogKey.file]: file }, 'cannot keep the evaluation memory exhaustions across restarts');
    }
  };
  const unsubscribe = pairs.onChange(() => {
    if (queued) return;
    queued = true;
    chain = chain.then(write);
  });
  signal.addEventListener('abort', unsubscribe, { once: true });
  return () => chain;
}
