/**
 * The admission benchmark's floor for a pool design: the ceiling
 * (ceiling-server.ts) with the parse and the answer moved to one worker
 * thread, as issue 16 requires of Portal's evaluation. Requests whose bodies
 * arrive in one event-loop turn travel in one message each way, as Portal's
 * batches do (src/evaluation/batcher.ts), with none of Portal's deadlines,
 * rules or bookkeeping. What this side costs above the ceiling is what the
 * hand-off between two threads costs on this machine, whatever the pool.
 *
 * Usage: node bench/ceiling-hop-server.ts CERT KEY  → prints `listening PORT`.
 */
import { readFileSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { isMainThread, parentPort, Worker } from 'node:worker_threads';

if (isMainThread) {
  const [certFile, keyFile] = process.argv.slice(2);
  if (!certFile || !keyFile) throw new Error('usage: ceiling-hop-server.ts CERT KEY');
  const worker = new Worker(new URL(import.meta.url));
  const waiting = new Map<number, ServerResponse>();
  let ids = 0;
  let batch: (number | string)[] = [];
  let queued = false;
  const flush = (): void => {
    queued = false;
    worker.postMessage(batch);
    batch = [];
  };
  worker.on('message', (answers: (number | string)[]) => {
    for (let i = 0; i < answers.length; i += 2) {
      const res = waiting.get(answers[i] as number)!;
      waiting.delete(answers[i] as number);
      res.setHeader('content-type', 'application/json');
      res.end(answers[i + 1] as string);
    }
  });
  const server = createServer({ cert: readFileSync(certFile), key: readFileSync(keyFile), minVersion: 'TLSv1.2' }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const id = ++ids;
      waiting.set(id, res);
      batch.push(id, Buffer.concat(chunks).toString());
      if (!queued) {
        queued = true;
        setImmediate(flush);
      }
    });
  });
  server.keepAliveTimeout = 72_000;
  server.listen(0, '127.0.0.1', () => {
    process.stdout.write(`listening ${(server.address() as AddressInfo).port}\n`);
  });
  process.on('SIGTERM', () => {
    server.closeAllConnections();
    server.close();
    void worker.terminate();
  });
} else {
  parentPort!.on('message', (bodies: (number | string)[]) => {
    const answers: (number | string)[] = [];
    for (let i = 0; i < bodies.length; i += 2) {
      const review = JSON.parse(bodies[i + 1] as string) as { apiVersion: string; request: { uid: string } };
      answers.push(bodies[i] as number, JSON.stringify({ apiVersion: review.apiVersion, kind: 'AdmissionReview', response: { uid: review.request.uid, allowed: true } }));
    }
    parentPort!.postMessage(answers);
  });
}
