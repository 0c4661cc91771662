import assert from 'node:assert/strict';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type PeerCertificate, type TLSSocket } from 'node:tls';
import { after, before, describe, it } from 'node:test';
import { generateServingCert } from '../../src/admission/certs.ts';
import { watchTlsFiles } from '../../src/admission/tls-reload.ts';
import { silentLogger } from '../../src/observability/logger.ts';
import { until } from '../support/until.ts';
import { allowAll, makePki, makeServer, podReview, type TestPki, type TestServer } from './helpers.ts';

/** One HTTPS POST /validate through `agent`; resolves with the response and the peer certificate of the socket used. */
function validate(port: number, ca: string, agent: Agent, uid: string): Promise<{ allowed: boolean; uid: string; fingerprint: string; reused: boolean }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, path: '/validate', method: 'POST', ca, agent, headers: { 'content-type': 'application/json' } },
      (res) => {
        const sock = res.socket as TLSSocket;
        const fingerprint = (sock.getPeerCertificate() as PeerCertificate).fingerprint256;
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const body = JSON.parse(Buffer.concat(chunks).toString()) as { response: { allowed: boolean; uid: string } };
          resolve({ ...body.response, fingerprint, reused: req.reusedSocket });
        });
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify(podReview({ uid })));
  });
}

describe('webhook TLS', () => {
  let pki: TestPki;
  let server: TestServer;
  let port: number;
  let dir: string;
  const ac = new AbortController();
  let watching: Promise<void>;
  /** Reasons the reloader kept changed files out (onRejected). */
  const rejections: string[] = [];

  before(async () => {
    pki = await makePki();
    dir = mkdtempSync(join(tmpdir(), 'portal-tls-'));
    writeFileSync(join(dir, 'tls.crt'), pki.serving.cert);
    writeFileSync(join(dir, 'tls.key'), pki.serving.key);
    server = makeServer(pki, allowAll());
    await server.app.listen({ port: 0, host: '127.0.0.1' });
    port = (server.app.server.address() as AddressInfo).port;
    rejections.length = 0;
    watching = watchTlsFiles(
      {
        certFile: join(dir, 'tls.crt'),
        keyFile: join(dir, 'tls.key'),
        target: server.app.server,
        initial: { cert: Buffer.from(pki.serving.cert), key: Buffer.from(pki.serving.key) },
        logger: silentLogger(),
        pollIntervalMs: 200,
        onRejected: (reason) => rejections.push(reason),
      },
      ac.signal,
    );
  });
  after(async () => {
    ac.abort();
    await watching;
    await server.app.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('refuses TLS 1.1 and accepts TLS 1.2 and 1.3', async () => {
    for (const [version, ok] of [['TLSv1.1', false], ['TLSv1.2', true], ['TLSv1.3', true]] as const) {
      // SECLEVEL=0 lets this client offer TLS 1.1, so the refusal comes from the server.
      const sock = connect({ host: '127.0.0.1', port, ca: pki.ca.cert, servername: 'localhost', minVersion: version, maxVersion: version, ciphers: 'DEFAULT:@SECLEVEL=0' });
      const outcome = await new Promise<string>((resolve) => {
        sock.once('secureConnect', () => resolve('connected'));
        sock.once('error', (e) => resolve(`error: ${e.message}`));
      });
      sock.destroy();
      if (ok) assert.equal(outcome, 'connected', version);
      else assert.match(outcome, /alert protocol version/, version);
    }
  });

  it('serves a rotated certificate to new connections without dropping an open keep-alive connection', async () => {
    const keepAlive = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const first = await validate(port, pki.ca.cert, keepAlive, 'k1');
      assert.equal(first.allowed, true);

      // Rotate the way a Secret volume or cert-manager would: write new files beside and rename over.
      const next = await generateServingCert(pki.ca, ['localhost'], ['127.0.0.1']);
      writeFileSync(join(dir, 'tls.key.new'), next.key);
      writeFileSync(join(dir, 'tls.crt.new'), next.cert);
      renameSync(join(dir, 'tls.key.new'), join(dir, 'tls.key'));
      renameSync(join(dir, 'tls.crt.new'), join(dir, 'tls.crt'));
      const nextFingerprint = new (await import('node:crypto')).X509Certificate(next.cert).fingerprint256;

      // The reload has no event visible to a client: poll until a fresh connection sees the new certificate.
      await until('a new connection to see the new certificate', 5000, async () => {
        const a = new Agent({ keepAlive: false });
        const fresh = (await validate(port, pki.ca.cert, a, 'fresh')).fingerprint;
        a.destroy();
        return fresh === nextFingerprint;
      }, { intervalMs: 50 });

      const again = await validate(port, pki.ca.cert, keepAlive, 'k2');
      assert.equal(again.reused, true, 'the keep-alive connection was kept');
      assert.equal(again.fingerprint, first.fingerprint, 'and still speaks the old session');
      assert.equal(again.uid, 'k2');
    } finally {
      keepAlive.destroy();
    }
  });

  it('keeps the current certificate when the new files are not a matching pair', async () => {
    const before = (await validate(port, pki.ca.cert, new Agent(), 'm0')).fingerprint;
    const other = await generateServingCert(pki.ca, ['localhost'], ['127.0.0.1']);
    const rejectedBefore = rejections.length;
    writeFileSync(join(dir, 'tls.crt'), other.cert); // key not rotated: mismatch
    // The reloader read the new pair and kept it out (an event, not three poll intervals of sleep).
    await until('the mismatched pair to be rejected', 5000, () => rejections.length > rejectedBefore);
    const a = new Agent({ keepAlive: false });
    const after = await validate(port, pki.ca.cert, a, 'm1');
    a.destroy();
    assert.equal(after.fingerprint, before);
  });
});
