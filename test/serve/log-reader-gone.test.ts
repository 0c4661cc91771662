// The reader of `portal serve`'s stdout (its log) goes away, a closed pipe,
// against a real process: the next log line fails with EPIPE. The replica
// must not crash with a stack trace because of it: it says so once on stderr,
// goes on answering admission, and its exit code is its shutdown's (0 on a
// clean SIGTERM), not the logging failure's. The log line is provoked the
// way an operator's day would: a certificate rotation that is not a valid
// pair yet (the replica warns and keeps its certificate).
import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { podReview, review, root, startServe } from '../replica/support.ts';
import { until } from '../support/until.ts';

const LOG_LOST = 'portal serve: cannot write the log to stdout (EPIPE): the log is lost from now on; the replica goes on\n';

test('portal serve: its log reader going away (EPIPE) neither crashes it nor changes its exit code', { timeout: 120_000 }, async (t) => {
  const s = await startServe(t, ['--policies', join(root, 'policies')], { POD_NAME: 'portal-log-gone' }, { listenTimeoutMs: 60_000, ready: true });
  const ca = await readFile(s.caFile);

  // Close the read end of the stdout pipe: the log reader is gone.
  s.child.stdout!.destroy();
  // Something to log: the serving certificate replaced by one that is not a valid pair.
  await writeFile(join(dirname(s.caFile), 'tls.crt'), 'not a certificate\n');
  await until('the replica to notice its log is lost', 30_000, () => {
    if (s.child.exitCode !== null) throw new Error(`portal serve exited ${s.child.exitCode}: ${s.stderr()}`);
    return s.stderr() !== '' ? true : undefined;
  });
  assert.equal(s.stderr(), LOG_LOST);

  // It goes on: admission is answered (with the certificate it kept) and it is alive.
  const denied = await review(s.webhook, ca, podReview({ privileged: true }), 30_000);
  assert.equal(denied.allowed, false);
  assert.equal(denied.status?.code, 403);
  assert.equal((await fetch(`${s.probes}/healthz`)).status, 200);

  // Its shutdown logs too (into the closed pipe): a clean shutdown still exits 0, with no stack trace.
  s.child.kill('SIGTERM');
  assert.equal(await s.exited, 0, s.stderr());
  assert.equal(s.stderr(), LOG_LOST, 'said once, and nothing else on stderr');
});
