/**
 * The embedded API server benchmark's ceiling: a bare node:http server that
 * accepts the same writes (POST/PATCH with a JSON body), stamps a counter as
 * resourceVersion, answers with the object and fans the event out to every
 * open `?watch=true` stream, serialised once. No storage, validation, merge
 * or selectors: whatever the real server costs above this is its own.
 *
 * Usage: node --import tsx bench/apiserver-ceiling.ts → prints `{"url":...}`.
 */
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

const watchers = new Set<ServerResponse>();
let rv = 0;

const server = createServer({ noDelay: true }, (req, res) => {
  if (req.method === 'GET' && (req.url ?? '').includes('watch=true')) {
    res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' });
    res.flushHeaders();
    watchers.add(res);
    res.on('close', () => watchers.delete(res));
    return;
  }
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const object = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { metadata?: Record<string, unknown> };
    object.metadata = { ...object.metadata, resourceVersion: String(++rv) };
    const line = `${JSON.stringify({ type: 'MODIFIED', object })}\n`;
    for (const w of watchers) w.write(line);
    const body = JSON.stringify(object);
    res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
    res.end(body);
  });
});
server.keepAliveTimeout = 65_000;
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, token: 'none' })}\n`);
});
process.on('SIGTERM', () => {
  for (const w of watchers) w.end();
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
