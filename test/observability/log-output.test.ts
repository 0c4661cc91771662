/**
 * LogOutput against a real pipe (a FIFO made by mkfifo, both ends opened
 * here, the write end non-blocking as Node makes stdout's): a reader that
 * stops reading costs dropped, counted lines and one report once it caught
 * up; giving up on it is bounded; a reader that goes away (EPIPE) is said
 * once. The e2e twin is test/hostile/log-reader-stalled.test.ts.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { closeSync, constants, mkdtempSync, openSync, readSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { Registry } from 'prom-client';
import { LogOutput, registerLogMetrics } from '../../src/observability/log-output.ts';
import { until } from '../support/until.ts';

/** A small bound, so that a few hundred lines overflow it (the product's is 4 MiB). */
const BOUND = 64 * 1024;
const LINE = `${'x'.repeat(999)}\n`;

interface Pipe {
  /** The write end, for the LogOutput (which closes it when it is destroyed: a descriptor other than 1 and 2). */
  write: number;
  /** Reads what the pipe holds now; returns the bytes read. */
  drain(): number;
  /** The reader goes away. */
  closeRead(): void;
}

function fifo(t: TestContext): Pipe {
  const dir = mkdtempSync(join(tmpdir(), 'portal-log-output-'));
  const path = join(dir, 'log');
  execFileSync('mkfifo', [path]);
  // Read end first, non-blocking (a FIFO's open waits for the other end otherwise).
  const read = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  const write = openSync(path, constants.O_WRONLY | constants.O_NONBLOCK);
  let readOpen = true;
  const closeRead = (): void => {
    if (readOpen) closeSync(read);
    readOpen = false;
  };
  t.after(() => {
    closeRead();
    rmSync(dir, { recursive: true, force: true });
  });
  const buf = Buffer.alloc(64 * 1024);
  return {
    write,
    closeRead,
    drain() {
      let n = 0;
      for (;;) {
        try {
          const got = readSync(read, buf);
          if (got === 0) return n;
          n += got;
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === 'EAGAIN') return n;
          throw err;
        }
      }
    },
  };
}

async function metricText(registry: Registry): Promise<string> {
  return registry.metrics();
}

test('a reader that stops reading: lines past the bound are dropped and counted, never waited for; one report once it caught up', async (t) => {
  const pipe = fifo(t);
  const reports: number[] = [];
  const output = new LogOutput({ fd: pipe.write, maxBufferBytes: BOUND, onCaughtUp: (n) => reports.push(n) });
  const registry = new Registry();
  registerLogMetrics(registry, () => output.dropped());
  assert.match(await metricText(registry), /^portal_log_lines_dropped_total\{reason="buffer_full"\} 0$/m);

  // Far more than the pipe (64 KiB on Linux) and the bound hold, written in one go: write() never blocks.
  const lines = 1000;
  for (let i = 0; i < lines; i++) output.write(LINE);
  // Writes run on libuv's threads: wait until the pipe refused and the buffer overflowed.
  await until('lines to be dropped', 10_000, () => output.dropped().buffer_full > 0);
  const dropped = output.dropped().buffer_full;
  assert.ok(dropped < lines, `${dropped} of ${lines} dropped: the bound is used first`);
  assert.match(await metricText(registry), new RegExp(`^portal_log_lines_dropped_total\\{reason="buffer_full"\\} ${dropped}$`, 'm'));
  assert.deepEqual(reports, [], 'no report while the reader is behind');

  // The reader reads again: what it gets is bounded, and one report follows.
  let got = 0;
  await until('the report', 10_000, () => {
    got += pipe.drain();
    return reports.length > 0;
  });
  assert.deepEqual(reports, [dropped]);
  assert.ok(got <= BOUND + 2 * 64 * 1024, `${got} bytes delivered, bound ${BOUND} + the pipe`);
  assert.equal(got, (lines - dropped) * LINE.length, 'every line not dropped was delivered whole');
  assert.equal(await output.settle(1000), true);
});

test('a reader that goes away (EPIPE): said once, later lines counted as output_failed', async (t) => {
  const pipe = fifo(t);
  const failures: string[] = [];
  const output = new LogOutput({ fd: pipe.write, onFailed: (err) => failures.push(err.code ?? err.message) });
  pipe.closeRead();
  output.write(LINE);
  await until('the failure', 10_000, () => failures.length > 0);
  output.write(LINE);
  output.write(LINE);
  assert.deepEqual(failures, ['EPIPE']);
  assert.equal(output.dropped().output_failed, 2);
  assert.equal(await output.settle(1000), true, 'nothing to give up: the loss was said when it happened');
});

// Last: the output given up may still have one retry of a full pipe pending
// (sonic-boom's, within 100 ms) on the descriptor it closed; opening nothing
// after it keeps that retry from landing on a reused descriptor number. (The
// product's descriptor is stdout, which sonic-boom never closes.)
test('giving up on a reader that never reads is bounded, and nothing is accepted afterwards is bounded, and nothing is accepted afterwards', async (t) => {
  const pipe = fifo(t);
  const output = new LogOutput({ fd: pipe.write, maxBufferBytes: BOUND });
  for (let i = 0; i < 300; i++) output.write(LINE);
  assert.equal(await output.settle(200), false, 'lines were given up');
  output.write(LINE);
  const got = pipe.drain();
  assert.ok(got < 300 * LINE.length, `${got} bytes: the rest was given up`);
});
