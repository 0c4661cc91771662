/**
 * Checks a PEM CA bundle (`--client-ca-file`) the way it will be used: every
 * certificate block must parse, and at least one must be a CA. Node's
 * `createSecureContext({ ca })` accepts any text without complaint, and a
 * bundle with no usable certificate would refuse every client, the API
 * server included, so this is checked at start-up and on every reload.
 */
import { X509Certificate } from 'node:crypto';

const BLOCK = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g;

/** What is wrong with the bundle, or undefined when it is usable. */
export function caBundleProblem(pem: string): string | undefined {
  const blocks = pem.match(BLOCK) ?? [];
  if (blocks.length === 0) return 'holds no PEM certificate (a "-----BEGIN CERTIFICATE-----" block)';
  let cas = 0;
  for (const [i, block] of blocks.entries()) {
    let cert: X509Certificate;
    try {
      cert = new X509Certificate(block);
    } catch (err) {
      return `certificate ${i + 1} of ${blocks.length} does not parse (${(err as Error).message})`;
    }
    if (cert.ca) cas++;
  }
  return cas === 0 ? 'holds no CA certificate (basicConstraints CA:TRUE); give the CA that signs the client certificates, not a client certificate' : undefined;
}
