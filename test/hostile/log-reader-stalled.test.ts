// The reader of `portal serve`'s log stays connected but stops reading (a
// stalled log collector), against a real process: nothing outside Portal's
// control may freeze a replica or grow it without bound (issue 16's spirit).
// The test's end of the stdout pipe is paused and never read while reviews
// are sent; at --log-level debug each review logs one line (`admission
// request`), and Pod names of 253 characters make each line ~0.5 KB, so a
// few thousand reviews fill the pipe and then the replica's bounded log
// buffer (src/observability/log-output.ts). What an operator sees is
// asserted: reviews are still decided (a privileged Pod denied, an ordinary
// one allowed) and /healthz answered, /metrics counts the dropped lines, and
// once the log is read again one line says how many were dropped; SIGTERM
// still exits 0 with its last lines in the log, and a second SIGTERM during
// the shutdown exits 1 at once, not by the signal's default. Every wait is on an event
// or a polled condition with a bound; no timing is asserted.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { podReview, review, root, startServe, type ReviewResponse, type Serve } from '../replica/support.ts';
import { until } from '../support/until.ts';
import { LOG_BUFFER_BYTES } from '../../src/observability/log-output.ts';
import { metricValue } from '../support/exposition.ts';

const DROPPED = 'portal_log_lines_dropped_total{reason="buffer_full"}';
/** Reviews in flight at once while filling the log. */
const CONCURRENCY = 8;
/** Reviews per round between two looks at /metrics. */
const ROUND = 400;
/** ~18 MB of log lines, 4x the buffer: not one dropped by then means the log is not bounded. */
const MAX_REVIEWS = 30_000;
/** What the socket pair between the processes and this side's paused stream hold besides the replica's buffer: a few hundred KiB on Linux. */
const PIPE_SLACK = 1024 * 1024;

/** A review whose log line is long: the longest name Kubernetes allows. */
function fatReview(i: number, privileged: boolean): Record<string, unknown> {
  const r = podReview({ privileged }) as { request: { name: string; object: { metadata: { name: string } } } };
  const name = `${i}-${'x'.repeat(253)}`.slice(0, 253);
  r.request.name = name;
  r.request.object.metadata.name = name;
  return r;
}

function assertDecided(a: ReviewResponse, privileged: boolean): void {
  if (privileged) {
    assert.equal(a.allowed, false, JSON.stringify(a));
    assert.equal(a.status?.code, 403, JSON.stringify(a));
  } else {
    assert.equal(a.allowed, true, JSON.stringify(a));
  }
}

async function probe(probes: string, path: string): Promise<{ status: number; text: string }> {
  const res = await fetch(`${probes}${path}`, { signal: AbortSignal.timeout(5_000) });
  return { status: res.status, text: await res.text() };
}

interface LogLine {
  msg?: string;
  component?: string;
  droppedLines?: number;
}

function parsed(lines: readonly string[]): LogLine[] {
  return lines.flatMap((l) => {
    try {
      return [JSON.parse(l) as LogLine];
    } catch {
      return [];
    }
  });
}

/** Sends reviews (each decided right) until /metrics counts dropped log lines; returns how many of each. */
/** Sends one round of reviews (ROUND, CONCURRENCY at a time), each decided right; `first` numbers them. */
async function sendRound(s: Serve, ca: Buffer, first: number): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < ROUND) {
        const i = first + next++;
        const privileged = i % 2 === 1;
        assertDecided(await review(s.webhook, ca, fatReview(i, privileged), 30_000), privileged);
      }
    }),
  );
}

/** Sends rounds of reviews until /metrics counts dropped log lines; returns how many of each. */
async function fillTheLog(s: Serve, ca: Buffer): Promise<{ sent: number; dropped: number }> {
  let sent = 0;
  const dropped = await until(
    'the replica to drop log lines',
    240_000,
    async () => {
      await sendRound(s, ca, sent);
      sent += ROUND;
      const dropped = metricValue((await probe(s.probes, '/metrics')).text, DROPPED);
      if (!dropped && sent >= MAX_REVIEWS) throw new Error(`${sent} reviews logged to a reader that never reads, and /metrics counts ${dropped} dropped lines: the log is not bounded`);
      return dropped || undefined;
    },
    { intervalMs: 0 },
  );
  return { sent, dropped };
}

/** Whether a TCP connection to 127.0.0.1:`port` is refused. */
function refused(port: number): Promise<boolean | undefined> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(undefined);
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'ECONNREFUSED' ? true : undefined));
  });
}

function serve(t: TestContext, pod: string): Promise<Serve> {
  return startServe(t, ['--policies', join(root, 'policies'), '--log-level', 'debug'], { POD_NAME: pod }, { listenTimeoutMs: 60_000, ready: true });
}

/**
 * A replica whose log reader stopped reading, with ~1.4 MB of log sent
 * since, several times what the pipe holds: lines wait in its buffer (not
 * necessarily up to its bound: the tests that use this are about the exit).
 */
async function stalledWithBacklog(t: TestContext, pod: string): Promise<Serve> {
  const s = await serve(t, pod);
  const ca = await readFile(s.caFile);
  s.child.stdout!.pause();
  for (let r = 0; r < 6; r++) await sendRound(s, ca, r * ROUND);
  return s;
}

test('portal serve: a log reader that stops reading costs dropped log lines, counted and reported, never admission', { timeout: 300_000 }, async (t) => {
  const s = await serve(t, 'portal-log-stalled');
  const ca = await readFile(s.caFile);
  const before = (await probe(s.probes, '/metrics')).text;
  assert.equal(metricValue(before, DROPPED), 0, 'the counter is exported, at 0, before anything is dropped');

  // The reader stays connected and stops reading: once the stream's own
  // buffer is full, nothing more is read from the pipe.
  s.child.stdout!.pause();
  const { sent, dropped } = await fillTheLog(s, ca);
  t.diagnostic(`${sent} reviews sent; ${dropped} log lines dropped`);

  // Still stalled: admission and the probes are answered.
  assertDecided(await review(s.webhook, ca, podReview({ privileged: true }), 5_000), true);
  assertDecided(await review(s.webhook, ca, podReview({ privileged: false }), 5_000), false);
  assert.equal((await probe(s.probes, '/healthz')).status, 200);
  assert.equal((await probe(s.probes, '/readyz')).status, 200);

  // The reader catches up: one line says how many lines it missed.
  const seen = s.lines.length;
  s.child.stdout!.resume();
  const report = await until('the "log lines were dropped" line', 60_000, () =>
    parsed(s.lines.slice(seen)).find((l) => l.msg?.endsWith('log lines were dropped')),
  );
  assert.equal(report.component, 'serve');
  assert.ok(report.droppedLines !== undefined && report.droppedLines >= dropped, `the line reports ${report.droppedLines} dropped, /metrics counted ${dropped} before`);
  assert.equal(report.msg, `the log reader fell behind: ${report.droppedLines} log lines were dropped`);
  // What the replica held for the reader is bounded: what the reader gets
  // after the stall, up to that line, is the buffer plus what the pipe and
  // this stream held (a few hundred KiB), not everything logged meanwhile.
  const after = s.lines.slice(seen);
  const held = after.slice(0, after.findIndex((l) => l.includes('log lines were dropped'))).reduce((n, l) => n + Buffer.byteLength(l) + 1, 0);
  t.diagnostic(`${held} bytes delivered after the stall, before the report`);
  assert.ok(held <= LOG_BUFFER_BYTES + PIPE_SLACK, `${held} bytes held for the reader, bound ${LOG_BUFFER_BYTES} + ${PIPE_SLACK}`);

  // A clean shutdown still exits 0, and its last line reaches the reader.
  s.child.kill('SIGTERM');
  assert.equal(await s.exited, 0, s.stderr());
  await until('the last log line', 30_000, () => parsed(s.lines).some((l) => l.component === 'serve' && l.msg === 'stopped'));
  assert.equal(s.stderr(), '', 'nothing on stderr');
});

test('portal serve: SIGTERM while its log reader is stalled still exits 0, giving up the lines the reader never took', { timeout: 300_000 }, async (t) => {
  // The stderr line below proves lines were still waiting.
  const s = await stalledWithBacklog(t, 'portal-log-stalled-exit');

  // Never read again: the replica may wait for its reader only within its exit window (a bounded time).
  s.child.kill('SIGTERM');
  assert.equal(await s.exited, 0, s.stderr());
  assert.equal(s.stderr(), 'portal serve: the log reader did not take the last lines of the log in time: they are lost\n');
});

test('portal serve: a second SIGTERM while its log reader is stalled exits 1 at once, by its own hand, not by the signal', { timeout: 300_000 }, async (t) => {
  // The exit window after the first signal waits on a reader that never reads.
  const s = await stalledWithBacklog(t, 'portal-log-stalled-twice');

  // The second signal lands once the first one's shutdown is under way (the
  // webhook refuses connections), while the replica waits on the stalled
  // reader: still handled. (Sent back to back, two signals merge into one.)
  s.child.kill('SIGTERM');
  const { port } = new URL(s.webhook);
  await until('the webhook to refuse connections (shutting down)', 30_000, () => refused(Number(port)), { intervalMs: 10 });
  s.child.kill('SIGTERM');
  assert.equal(await s.exited, 1, s.stderr());
  assert.equal(s.child.signalCode, null, 'exited by its own hand, not killed by the signal');
});
