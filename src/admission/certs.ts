/**
 * Throw-away certificates for local use: a CA, and serving certificates it
 * signs (`portal serve --self-signed`, and `portal dev`'s webhook CA). Pure
 * JS (selfsigned / node-forge), PEM out. ECDSA P-256 keeps generation in
 * milliseconds instead of RSA's hundreds.
 */
import { isIP } from 'node:net';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { generate } from 'selfsigned';

export interface PemPair {
  /** PEM certificate. */
  cert: string;
  /** PEM private key. */
  key: string;
}

/** Validity of generated certificates: long enough for a dev session or a benchmark, short enough to never be mistaken for production. */
const VALIDITY_DAYS = 30;

function validity(): { notBeforeDate: Date; notAfterDate: Date } {
  // Backdate one hour so a slightly skewed clock does not reject a fresh cert.
  const notBeforeDate = new Date(Date.now() - 3_600_000);
  return { notBeforeDate, notAfterDate: new Date(notBeforeDate.getTime() + VALIDITY_DAYS * 86_400_000) };
}

export async function generateCA(commonName: string): Promise<PemPair> {
  const r = await generate([{ name: 'commonName', value: commonName }], {
    keyType: 'ec',
    algorithm: 'sha256',
    ...validity(),
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    ],
  });
  return { cert: r.cert, key: r.private };
}

export async function generateServingCert(ca: PemPair, dnsNames: readonly string[], ipAddresses: readonly string[] = []): Promise<PemPair> {
  for (const ip of ipAddresses) {
    if (isIP(ip) === 0) throw new TypeError(`not an IP address: ${ip}`);
  }
  const r = await generate([{ name: 'commonName', value: dnsNames[0] ?? ipAddresses[0] ?? 'portal' }], {
    keyType: 'ec',
    algorithm: 'sha256',
    ...validity(),
    ca: { cert: ca.cert, key: ca.key },
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      {
        name: 'subjectAltName',
        altNames: [...dnsNames.map((value) => ({ type: 2 as const, value })), ...ipAddresses.map((ip) => ({ type: 7 as const, ip }))],
      },
    ],
  });
  return { cert: r.cert, key: r.private };
}

export interface SelfSignedFiles {
  caFile: string;
  certFile: string;
  keyFile: string;
}

/** Generates a CA and a serving certificate for `localhost`/loopback (plus extra names) and writes them to `dir`. */
export async function writeSelfSigned(dir: string, dnsNames: readonly string[] = ['localhost'], ipAddresses: readonly string[] = ['127.0.0.1', '::1']): Promise<SelfSignedFiles> {
  const ca = await generateCA('portal-self-signed-ca');
  const serving = await generateServingCert(ca, dnsNames, ipAddresses);
  const files = { caFile: join(dir, 'ca.crt'), certFile: join(dir, 'tls.crt'), keyFile: join(dir, 'tls.key') };
  await writeFile(files.caFile, ca.cert);
  await writeFile(files.certFile, serving.cert);
  await writeFile(files.keyFile, serving.key, { mode: 0o600 });
  return files;
}
