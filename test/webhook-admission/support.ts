/**
 * Real HTTPS admission webhooks for the admission-chain tests: a CA generated
 * per test file, servers on port 0, every request recorded.
 */
import type { ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { generateCA, generateServingCert, type PemPair } from '../../src/admission/certs.ts';

export interface ReceivedRequest {
  url: string;
  headers: Record<string, string | string[] | undefined>;
  review: Record<string, unknown> & { request: Record<string, unknown> & { uid: string } };
}

/** What the handler answers: a review response, or a raw reply. */
export type Reply =
  | { response: Record<string, unknown>; apiVersion?: string; kind?: string }
  | { raw: { status: number; body: string } }
  | { hang: true };

export interface TestWebhook {
  url: string;
  port: number;
  received: ReceivedRequest[];
  /** TLS connections accepted so far. */
  connections(): number;
  close(): Promise<void>;
}

export interface Pki {
  ca: PemPair;
  /** base64 of the CA PEM, for caBundle. */
  caBundle: string;
  serving: PemPair;
}

export async function makePki(dnsNames: string[] = ['localhost'], ips: string[] = ['127.0.0.1']): Promise<Pki> {
  const ca = await generateCA('webhook-test-ca');
  const serving = await generateServingCert(ca, dnsNames, ips);
  return { ca, caBundle: Buffer.from(ca.cert).toString('base64'), serving };
}

/** Default handler: allow. */
export const allow = (uid: string): Reply => ({ response: { uid, allowed: true } });

export async function startWebhook(pki: Pki, handler: (req: ReceivedRequest) => Reply = (r) => allow(r.review.request.uid)): Promise<TestWebhook> {
  const received: ReceivedRequest[] = [];
  const hanging = new Set<ServerResponse>();
  const server = https.createServer({ cert: pki.serving.cert, key: pki.serving.key }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const review = JSON.parse(Buffer.concat(chunks).toString('utf8')) as ReceivedRequest['review'];
      const r: ReceivedRequest = { url: req.url ?? '', headers: req.headers, review };
      received.push(r);
      const reply = handler(r);
      if ('hang' in reply) {
        hanging.add(res);
        return;
      }
      if ('raw' in reply) {
        res.writeHead(reply.raw.status, { 'content-type': 'application/json' }).end(reply.raw.body);
        return;
      }
      const body = {
        apiVersion: reply.apiVersion ?? review['apiVersion'],
        kind: reply.kind ?? 'AdmissionReview',
        response: reply.response,
      };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    });
  });
  let connections = 0;
  server.on('secureConnection', () => connections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `https://127.0.0.1:${port}/validate`,
    port,
    received,
    connections: () => connections,
    close: () =>
      new Promise<void>((resolve) => {
        for (const res of hanging) res.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A ValidatingWebhookConfiguration with one webhook per entry. */
export function webhookConfiguration(name: string, webhooks: Record<string, unknown>[]): Record<string, unknown> {
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingWebhookConfiguration',
    metadata: { name },
    webhooks: webhooks.map((w) => ({
      admissionReviewVersions: ['v1'],
      sideEffects: 'None',
      rules: [{ apiGroups: [''], apiVersions: ['v1'], resources: ['pods'], operations: ['CREATE', 'UPDATE'] }],
      ...w,
    })),
  };
}
