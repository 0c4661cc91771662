/**
 * One HTTPS POST of an AdmissionReview, as kube-apiserver's webhook client
 * makes it: HTTP/1.1, `Content-Type: application/json`, `?timeout=Ns`, the
 * server certificate verified against `caBundle` (system roots without one)
 * for the host name of the URL — for service references the DNS name
 * `<svc>.<ns>.svc`, whatever address it is actually reached at.
 */
import https from 'node:https';
import { isIP } from 'node:net';

/**
 * kube-apiserver does not cap webhook responses explicitly; an
 * AdmissionReview response carries no object, so 3 MiB (the apiserver's own
 * request body limit) is far beyond any honest answer and still bounded.
 */
const MAX_RESPONSE_BYTES = 3 * 1024 * 1024;

export interface WebhookTarget {
  /** The URL kube-apiserver would use (messages, Host header, certificate name). */
  url: URL;
  /** Where to connect; defaults to the URL's host and port. */
  connect?: { host: string; port: number };
}

export interface PostOptions {
  target: WebhookTarget;
  /** PEM CA bundle (decoded caBundle); system roots when absent. */
  ca: string | undefined;
  body: string;
  timeoutMs: number;
  signal: AbortSignal;
  agent: https.Agent;
}

/** A failure to get a decodable answer: kube's `ErrCallingWebhook` reason. */
export class WebhookCallError extends Error {
  override readonly name = 'WebhookCallError';
}

/** The POST of `opts.body` to the target: connected to its address, verified against the URL's name. */
function requestOptions(opts: PostOptions, hostname: string): https.RequestOptions {
  const { url } = opts.target;
  return {
    method: 'POST',
    host: opts.target.connect?.host ?? hostname,
    port: opts.target.connect?.port ?? (url.port ? Number(url.port) : 443),
    path: `${url.pathname}${url.search}`,
    // SNI and certificate verification use the URL's name, not the address
    // we connect to: tls.connect checks the certificate against `servername`
    // when given, else against `host`, which is then the URL's own (an IP
    // address: SNI must not be one, and only a `url` can name one). No
    // per-request `checkServerIdentity`: Node's https.Agent never pools a
    // socket verified by one (it could not vouch for the next request), and
    // kube-apiserver keeps its webhook connections alive. Without pooling,
    // every call paid a TLS handshake: seconds each on a loaded machine.
    ...(isIP(hostname) === 0 ? { servername: hostname } : {}),
    headers: {
      host: url.host,
      'content-type': 'application/json',
      accept: 'application/json, */*',
      'content-length': Buffer.byteLength(opts.body),
    },
    ...(opts.ca !== undefined ? { ca: opts.ca } : {}),
    minVersion: 'TLSv1.2',
    agent: opts.agent,
  };
}

/** The decoded body of a 2xx answer, or why there is none in client-go's words. */
function decodeAnswer(code: number, text: string): { value: unknown } | { error: string } {
  if (code < 200 || code > 299) {
    return {
      error: text.trim() === ''
        ? `the server responded with the status code ${code} but did not return more information`
        : `an error on the server (${JSON.stringify(text.slice(0, 256))}) has prevented the request from succeeding (status ${code})`,
    };
  }
  try {
    return { value: JSON.parse(text) as unknown };
  } catch (err) {
    return { error: `couldn't decode the response: ${(err as Error).message}` };
  }
}

/** Resolves with the decoded JSON body of a 2xx answer; rejects with a WebhookCallError. */
export function postAdmissionReview(opts: PostOptions): Promise<unknown> {
  const { url } = opts.target;
  const hostname = url.hostname.replace(/^\[|\]$/g, '');
  const shown = `Post "${url.href}"`;
  return new Promise((resolve, reject) => {
    let settled = false;
    const fail = (reason: string): void => {
      if (settled) return;
      settled = true;
      reject(new WebhookCallError(`failed to call webhook: ${reason}`));
    };
    const req = https.request(requestOptions(opts, hostname));
    const timer = setTimeout(() => req.destroy(new Error('context deadline exceeded')), opts.timeoutMs);
    const onAbort = (): void => {
      req.destroy(new Error('context canceled'));
    };
    opts.signal.addEventListener('abort', onAbort, { once: true });
    const cleanup = (): void => {
      clearTimeout(timer);
      opts.signal.removeEventListener('abort', onAbort);
    };
    req.on('error', (err) => {
      cleanup();
      fail(`${shown}: ${err.message}`);
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_RESPONSE_BYTES) {
          req.destroy(new Error(`response body larger than ${MAX_RESPONSE_BYTES} bytes`));
          return;
        }
        chunks.push(chunk);
      });
      res.on('error', (err) => {
        cleanup();
        fail(`${shown}: ${err.message}`);
      });
      res.on('end', () => {
        cleanup();
        const answer = decodeAnswer(res.statusCode ?? 0, Buffer.concat(chunks).toString('utf8'));
        if ('error' in answer) {
          fail(answer.error);
          return;
        }
        settled = true;
        resolve(answer.value);
      });
    });
    req.end(opts.body);
  });
}
