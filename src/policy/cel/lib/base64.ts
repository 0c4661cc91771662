/** cel-go's encoders extension: base64.encode(bytes), base64.decode(string). */
import type { Environment } from '@marcbachmann/cel-js';
import { celError } from './errors.ts';

export function registerBase64(env: Environment): void {
  env.registerFunction('base64_encode(bytes): string', (b: Uint8Array) => Buffer.from(b).toString('base64'));
  env.registerFunction('base64_decode(string): bytes', (s: string) => {
    // Go's decoder accepts padded and unpadded standard base64, and nothing else.
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(s)) throw celError('base64.decode: illegal base64 data');
    return new Uint8Array(Buffer.from(s, 'base64'));
  });
}
