/** Reading a request body: bounded as kube-apiserver bounds it, decoded from JSON, YAML or protobuf. */
import type { IncomingMessage } from 'node:http';
import type { RequestScope } from './cluster.ts';
import { parseJsonBody, parseYamlBody } from './openapi/duplicates.ts';
import { decodeObject, PROTOBUF_MEDIA_TYPE, ProtobufError, UnsupportedKind } from './protobuf/codec.ts';
import { isProtobufBody } from './protobuf/negotiate.ts';
import { ApiError, errors } from './status.ts';

/** kube-apiserver's request body limit (3 MiB). */
const MAX_BODY = 3 * 1024 * 1024;

export async function readBody(req: IncomingMessage): Promise<string> {
  return (await readBodyBytes(req)).toString('utf8');
}

export function readBodyBytes(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        reject(new ApiError(413, 'RequestEntityTooLarge', 'Request entity too large: limit is 3145728'));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

export function parseJson(raw: string): unknown {
  if (!raw) return undefined;
  try {
    return JSON.parse(raw);
  } catch (e) {
    throw errors.badRequest(`couldn't get version/kind; json parse error: ${(e as Error).message}`);
  }
}

/** A protobuf request body as its JSON object: 415 for a kind without a protobuf form, 400 for bad bytes. */
export function decodeProtobufBody(bytes: Buffer): unknown {
  try {
    return decodeObject(bytes);
  } catch (e) {
    if (e instanceof UnsupportedKind) {
      throw new ApiError(415, 'UnsupportedMediaType', `the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (${e.message})`,
        { causes: [{ reason: 'UnsupportedMediaType', message: PROTOBUF_MEDIA_TYPE }] });
    }
    if (e instanceof ProtobufError) throw errors.badRequest(`the protobuf body cannot be decoded: ${e.message}`);
    throw e;
  }
}

/** A request body as an object (JSON or protobuf), for the review APIs. */
export async function readJsonOrProtobuf(req: IncomingMessage): Promise<unknown> {
  if (isProtobufBody(req.headers['content-type'])) return decodeProtobufBody(await readBodyBytes(req));
  return parseJson(await readBody(req));
}

/** A write's body as an object: protobuf, YAML or JSON (duplicate keys noted on the scope for strict decoding). */
export async function readObjectBody(req: IncomingMessage, s: RequestScope): Promise<unknown> {
  if (isProtobufBody(req.headers['content-type'])) return decodeProtobufBody(await readBodyBytes(req));
  const raw = await readBody(req);
  if (!raw) return undefined;
  const yaml = /^application\/yaml\b/i.test(req.headers['content-type'] ?? '');
  const decoded = yaml ? parseYamlBody(raw) : parseJsonBody(raw);
  if (decoded.duplicates.length) s.duplicateFields = decoded.duplicates;
  return decoded.value;
}
