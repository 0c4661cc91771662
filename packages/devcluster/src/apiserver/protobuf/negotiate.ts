/**
 * Content negotiation for protobuf, as client-go uses it: typed clients send
 * `Accept: application/vnd.kubernetes.protobuf,application/json` and a
 * protobuf body. The server answers in protobuf when protobuf comes before
 * any JSON in Accept and the object's kind has a protobuf form; otherwise
 * JSON, which such an Accept also allows (client-go decodes a response by
 * its Content-Type). Tables (`as=Table`) and watch streams stay JSON.
 */
import { PROTOBUF_MEDIA_TYPE } from './codec.ts';

/** True when the first acceptable media type is plain protobuf (no `as=`, no `stream=`). */
export function wantsProtobuf(accept: string | undefined): boolean {
  if (!accept || !accept.includes(PROTOBUF_MEDIA_TYPE)) return false;
  for (const part of accept.split(',')) {
    const [type = '', ...params] = part.split(';').map((s) => s.trim().toLowerCase());
    if (type === PROTOBUF_MEDIA_TYPE) return !params.some((p) => p.startsWith('as=') || p.startsWith('stream='));
    if (type === 'application/json' || type === 'application/yaml' || type === '*/*' || type === 'application/*') return false;
  }
  return false;
}

export function isProtobufBody(contentType: string | undefined): boolean {
  return (contentType ?? '').split(';')[0]!.trim().toLowerCase() === PROTOBUF_MEDIA_TYPE;
}
