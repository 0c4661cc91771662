/** Writing an API answer: JSON or protobuf as the client asked, with Warning and Retry-After headers as kube-apiserver sends them. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { encodeObject, PROTOBUF_MEDIA_TYPE } from './protobuf/codec.ts';
import { wantsProtobuf } from './protobuf/negotiate.ts';
import { isPlainObject } from './types.ts';

function warningHeader(w: string): string {
  // Node refuses non-latin1 characters in header values; kube-apiserver sends
  // the warning's raw UTF-8 bytes, so do the same (each byte as one latin1 char).
  const text = `299 - "${w.replace(/[\\"]/g, (c) => `\\${c}`).replace(/[\r\n]/g, ' ')}"`;
  return Buffer.from(text, 'utf8').toString('latin1');
}

export function sendJson(res: ServerResponse, code: number, body: unknown, warnings: string[] = []): void {
  send(res, code, body, warnings, undefined);
}

/** Answers in protobuf when the client asked for it first and the kind has a protobuf form (protobuf/negotiate.ts). */
export function sendReply(req: IncomingMessage, res: ServerResponse, code: number, body: unknown, warnings: string[]): void {
  const proto = wantsProtobuf(req.headers.accept) && isPlainObject(body) ? encodeObject(body) : undefined;
  send(res, code, body, warnings, proto);
}

function send(res: ServerResponse, code: number, body: unknown, warnings: string[], proto: Uint8Array | undefined): void {
  if (res.headersSent || res.destroyed) return;
  // A string body makes Node send headers and body in one UTF-8 write, which
  // would re-encode the latin1 Warning bytes; a Buffer keeps them raw.
  const data = proto ?? Buffer.from(JSON.stringify(body), 'utf8');
  const headers: Record<string, string | string[] | number> = {
    'Content-Type': proto ? PROTOBUF_MEDIA_TYPE : 'application/json',
    'Content-Length': data.length,
    'Cache-Control': 'no-cache, private',
  };
  if (warnings.length) headers['Warning'] = warnings.map(warningHeader);
  if (code === 429 || code === 500) {
    const retry = isPlainObject(body) && isPlainObject(body['details']) ? body['details']['retryAfterSeconds'] : undefined;
    if (typeof retry === 'number') headers['Retry-After'] = String(retry);
  }
  res.writeHead(code, headers);
  res.end(data);
}
