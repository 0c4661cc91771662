/**
 * Runtime input problems on the real executable: a port in use is a clear
 * one-line error with exit 1; the running webhook answers malformed reviews
 * with a clear status and never allows them.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { request } from 'node:https';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { describe, it } from 'node:test';
import { assertReported, ROOT, runPortal } from './portal.ts';

const POLICIES = join(ROOT, 'policies');

describe('portal serve at run time', () => {
  it('a webhook port already in use: one clear line, exit 1', async () => {
    const holder = createServer();
    holder.listen(0, '127.0.0.1');
    await once(holder, 'listening');
    try {
      const port = (holder.address() as AddressInfo).port;
      const r = await runPortal(['serve', '--self-signed', '--policies', POLICIES, '--bind-address', '127.0.0.1', '--probes-port', '0', '--webhook-port', String(port)]);
      assertReported(r, 1, new RegExp(`cannot listen on 127\\.0\\.0\\.1:${port} \\(--webhook-port\\): the port is already in use; stop what uses it or give another --webhook-port`));
    } finally {
      holder.close();
    }
  });

  it('answers a CREATE with a null object with 400 and allowed: false', async (t) => {
    const child = spawn(process.execPath, [join(ROOT, 'bin', 'portal.js'), 'serve', '--self-signed', '--policies', POLICIES, '--bind-address', '127.0.0.1', '--probes-port', '0', '--webhook-port', '0'], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    t.after(() => child.kill('SIGKILL'));
    const url = await new Promise<string>((resolve, reject) => {
      // Generous: on a loaded 2-core machine the start alone took 12 s (the test asserts the answers, not the start time).
      const timer = setTimeout(() => reject(new Error('serve did not start within 90 s')), 90_000);
      child.on('exit', (code) => reject(new Error(`serve exited ${code}`)));
      createInterface({ input: child.stdout }).on('line', (line) => {
        const rec = JSON.parse(line) as { msg: string; url?: string };
        if (rec.msg === 'webhook listening' && rec.url) {
          clearTimeout(timer);
          resolve(rec.url);
        }
      });
    });
    const post = (body: string, method = 'POST'): Promise<{ status: number; body: string }> =>
      new Promise((resolve, reject) => {
        const req = request(url, { method, rejectUnauthorized: false, headers: { 'content-type': 'application/json' } }, (res) => {
          let data = '';
          res.setEncoding('utf8').on('data', (d: string) => (data += d));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: data }));
        });
        req.on('error', reject);
        req.end(body);
      });
    const review = (request: Record<string, unknown>) =>
      JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: { uid: 'u-1', kind: { group: '', version: 'v1', kind: 'Pod' }, namespace: 'default', name: 'p', ...request } });

    for (const operation of ['CREATE', 'UPDATE']) {
      const r = await post(review({ operation, object: null }));
      assert.equal(r.status, 400, r.body);
      const resp = (JSON.parse(r.body) as { response: { uid: string; allowed: boolean; status: { message: string } } }).response;
      assert.equal(resp.uid, 'u-1');
      assert.equal(resp.allowed, false);
      assert.match(resp.status.message, new RegExp(`request\\.object is missing or null on a ${operation}`));
    }
    // A DELETE carries no object by design: still evaluated, not a 400.
    const del = await post(review({ operation: 'DELETE', object: null, oldObject: { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p' } } }));
    assert.equal(del.status, 200, del.body);
    // Array and empty bodies: 400, never allowed.
    for (const body of ['[1,2]', '']) {
      const r = await post(body);
      assert.equal(r.status, 400, r.body);
      assert.equal((JSON.parse(r.body) as { response: { allowed: boolean } }).response.allowed, false);
    }
  });
});
