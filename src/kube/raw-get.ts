/**
 * A plain JSON GET against the API server with the kubeconfig's credentials.
 * Informers list through this instead of the generated APIs so that list
 * items arrive as the same plain JSON as watch events (the generated APIs
 * turn them into model instances with Date fields).
 */
import http from 'node:http';
import https from 'node:https';
import type { KubeClient } from './client.ts';

export class KubeHttpError extends Error {
  readonly statusCode: number;
  readonly body: string;
  constructor(statusCode: number, body: string) {
    let message = `HTTP ${statusCode}`;
    try {
      const status = JSON.parse(body) as { message?: unknown };
      if (typeof status.message === 'string') message += `: ${status.message}`;
    } catch {
      // not a Status object; keep the bare code
    }
    super(message);
    this.name = 'KubeHttpError';
    this.statusCode = statusCode;
    this.body = body;
  }
}

export async function kubeGetJson<T>(client: KubeClient, pathAndQuery: string, signal?: AbortSignal): Promise<T> {
  const url = new URL(client.server.replace(/\/$/, '') + pathAndQuery);
  const options: https.RequestOptions = { method: 'GET', headers: { Accept: 'application/json', 'User-Agent': client.userAgent } };
  await client.kubeConfig.applyToHTTPSOptions(options);
  const request = url.protocol === 'http:' ? http.request : https.request;
  return new Promise<T>((resolve, reject) => {
    const req = request(url, { ...options, ...(signal ? { signal } : {}) }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        if ((res.statusCode ?? 0) < 200 || (res.statusCode ?? 0) >= 300) {
          reject(new KubeHttpError(res.statusCode ?? 0, body));
          return;
        }
        try {
          resolve(JSON.parse(body) as T);
        } catch (err) {
          reject(err);
        }
      });
    });
    req.on('error', reject);
    req.end();
  });
}
