/**
 * The admission benchmark's ceiling: a bare Node HTTPS server that only
 * parses the AdmissionReview and echoes an allow with its uid. Whatever
 * Portal costs above this is Portal's own overhead.
 *
 * Usage: node --import tsx bench/ceiling-server.ts CERT KEY  → prints `listening PORT`.
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';

const [certFile, keyFile] = process.argv.slice(2);
if (!certFile || !keyFile) throw new Error('usage: ceiling-server.ts CERT KEY');

const server = createServer({ cert: readFileSync(certFile), key: readFileSync(keyFile), minVersion: 'TLSv1.2' }, (req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const review = JSON.parse(Buffer.concat(chunks).toString()) as { apiVersion: string; request: { uid: string } };
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ apiVersion: review.apiVersion, kind: 'AdmissionReview', response: { uid: review.request.uid, allowed: true } }));
  });
});
server.keepAliveTimeout = 72_000;
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`listening ${(server.address() as AddressInfo).port}\n`);
});
process.on('SIGTERM', () => {
  server.closeAllConnections();
  server.close();
});
