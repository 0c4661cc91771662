// Hand-written, not ipaddr.js: ipaddr.js reads "010.1.1.1" as octal (8.1.1.1), accepts "0x7f.0.0.1" and zones ("fe80::1%eth0") and prints "::ffff:102:304", where Go's netip (Kubernetes) refuses or prints "::ffff:1.2.3.4".
/**
 * Kubernetes' IP and CIDR libraries (apiserver/pkg/cel/library/ip.go,
 * cidr.go), which parse like Go's netip: no leading zeros in IPv4, no zones,
 * and IPv4-mapped IPv6 addresses are refused.
 */
import type { Environment } from '@marcbachmann/cel-js';
import { celError } from './errors.ts';

export class IP {
  constructor(readonly bytes: readonly number[]) {}
  get family(): 4 | 6 {
    return this.bytes.length === 4 ? 4 : 6;
  }
  toString(): string {
    return formatIP(this.bytes);
  }
}

export class CIDR {
  constructor(
    readonly ip: IP,
    readonly prefix: number,
  ) {}
  toString(): string {
    return `${this.ip.toString()}/${this.prefix}`;
  }
}

function parseV4(s: string): number[] | undefined {
  const parts = s.split('.');
  if (parts.length !== 4) return undefined;
  const out: number[] = [];
  for (const p of parts) {
    if (!/^(0|[1-9]\d{0,2})$/.test(p)) return undefined;
    const n = Number(p);
    if (n > 255) return undefined;
    out.push(n);
  }
  return out;
}

function parseV6(s: string): number[] | undefined {
  if (s.includes('%')) return undefined;
  let head = s;
  let tail = '';
  const dbl = s.indexOf('::');
  if (dbl >= 0) {
    if (s.indexOf('::', dbl + 1) >= 0) return undefined;
    head = s.slice(0, dbl);
    tail = s.slice(dbl + 2);
  }
  const groups = (x: string): number[] | undefined => {
    if (x === '') return [];
    const out: number[] = [];
    const parts = x.split(':');
    for (let i = 0; i < parts.length; i++) {
      const p = parts[i] ?? '';
      if (i === parts.length - 1 && p.includes('.')) {
        const v4 = parseV4(p);
        if (!v4) return undefined;
        out.push((v4[0]! << 8) | v4[1]!, (v4[2]! << 8) | v4[3]!);
      } else {
        if (!/^[0-9a-fA-F]{1,4}$/.test(p)) return undefined;
        out.push(parseInt(p, 16));
      }
    }
    return out;
  };
  const h = groups(head);
  const t = groups(tail);
  if (!h || !t) return undefined;
  const n = h.length + t.length;
  if (dbl >= 0 ? n > 7 : n !== 8) return undefined;
  const all = [...h, ...new Array<number>(8 - n).fill(0), ...t];
  return all.flatMap((g) => [g >> 8, g & 0xff]);
}

function parseIP(s: string): IP | undefined {
  if (s.includes(':')) {
    const b = parseV6(s);
    if (!b) return undefined;
    // IPv4-mapped IPv6 (::ffff:a.b.c.d) is ambiguous and refused by Kubernetes.
    if (b.slice(0, 10).every((x) => x === 0) && b[10] === 0xff && b[11] === 0xff) return undefined;
    return new IP(b);
  }
  const b = parseV4(s);
  return b ? new IP(b) : undefined;
}

function formatIP(b: readonly number[]): string {
  if (b.length === 4) return b.join('.');
  const g: number[] = [];
  for (let i = 0; i < 16; i += 2) g.push((b[i]! << 8) | b[i + 1]!);
  // RFC 5952: compress the longest run (≥ 2) of zero groups, the first on ties.
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (g[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i > bestLen) {
      best = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = (x: number[]): string => x.map((v) => v.toString(16)).join(':');
  if (best < 0) return hex(g);
  return `${hex(g.slice(0, best))}::${hex(g.slice(best + bestLen))}`;
}

function ip(s: string): IP {
  const v = parseIP(s);
  if (!v) throw celError(`IP Address ${JSON.stringify(s)} parse error during conversion from string: not a valid IPv4 or IPv6 address (zones and IPv4-mapped IPv6 are not allowed)`);
  return v;
}

function parseCIDR(s: string): CIDR | undefined {
  const slash = s.indexOf('/');
  if (slash < 0) return undefined;
  const addr = parseIP(s.slice(0, slash));
  const p = s.slice(slash + 1);
  if (!addr || !/^(0|[1-9]\d*)$/.test(p)) return undefined;
  const prefix = Number(p);
  if (prefix > addr.bytes.length * 8) return undefined;
  return new CIDR(addr, prefix);
}

function cidr(s: string): CIDR {
  const c = parseCIDR(s);
  if (!c) throw celError(`network address parse error during conversion from string: ${JSON.stringify(s)} is not a valid CIDR`);
  return c;
}

function mask(b: readonly number[], prefix: number): number[] {
  return b.map((x, i) => {
    const bits = Math.max(0, Math.min(8, prefix - i * 8));
    return x & ((0xff << (8 - bits)) & 0xff);
  });
}

function containsIP(c: CIDR, a: IP): boolean {
  if (a.bytes.length !== c.ip.bytes.length) return false;
  const m1 = mask(c.ip.bytes, c.prefix);
  const m2 = mask(a.bytes, c.prefix);
  return m1.every((x, i) => x === m2[i]);
}

const isUnspecified = (a: IP): boolean => a.bytes.every((x) => x === 0);
const isLoopback = (a: IP): boolean => (a.family === 4 ? a.bytes[0] === 127 : a.bytes.slice(0, 15).every((x) => x === 0) && a.bytes[15] === 1);
const isMulticast = (a: IP): boolean => (a.family === 4 ? (a.bytes[0]! & 0xf0) === 0xe0 : a.bytes[0] === 0xff);
const isLinkLocalUnicast = (a: IP): boolean =>
  a.family === 4 ? a.bytes[0] === 169 && a.bytes[1] === 254 : a.bytes[0] === 0xfe && (a.bytes[1]! & 0xc0) === 0x80;
const isLinkLocalMulticast = (a: IP): boolean =>
  a.family === 4 ? a.bytes[0] === 224 && a.bytes[1] === 0 && a.bytes[2] === 0 : a.bytes[0] === 0xff && (a.bytes[1]! & 0x0f) === 0x02;
const isGlobalUnicast = (a: IP): boolean =>
  !(a.family === 4 && a.bytes.every((x) => x === 255)) && !isUnspecified(a) && !isLoopback(a) && !isMulticast(a) && !isLinkLocalUnicast(a);

export function registerIP(env: Environment): void {
  env.registerType('IP', IP);
  env.registerType('CIDR', CIDR);
  env.registerFunction('ip(string): IP', ip);
  env.registerFunction('isIP(string): bool', (s: string) => parseIP(s) !== undefined);
  env.registerFunction('ip_isCanonical(string): bool', (s: string) => ip(s).toString() === s);
  env.registerFunction('IP.family(): int', (a: IP) => BigInt(a.family));
  env.registerFunction('IP.isUnspecified(): bool', isUnspecified);
  env.registerFunction('IP.isLoopback(): bool', isLoopback);
  env.registerFunction('IP.isLinkLocalMulticast(): bool', isLinkLocalMulticast);
  env.registerFunction('IP.isLinkLocalUnicast(): bool', isLinkLocalUnicast);
  env.registerFunction('IP.isGlobalUnicast(): bool', isGlobalUnicast);
  env.registerFunction('string(IP): string', (a: IP) => a.toString());
  env.registerFunction('cidr(string): CIDR', cidr);
  env.registerFunction('isCIDR(string): bool', (s: string) => parseCIDR(s) !== undefined);
  env.registerFunction('CIDR.containsIP(IP): bool', containsIP);
  env.registerFunction('CIDR.containsIP(string): bool', (c: CIDR, s: string) => containsIP(c, ip(s)));
  env.registerFunction('CIDR.containsCIDR(CIDR): bool', (c: CIDR, o: CIDR) => o.prefix >= c.prefix && containsIP(c, o.ip));
  env.registerFunction('CIDR.containsCIDR(string): bool', (c: CIDR, s: string) => {
    const o = cidr(s);
    return o.prefix >= c.prefix && containsIP(c, o.ip);
  });
  env.registerFunction('CIDR.ip(): IP', (c: CIDR) => c.ip);
  env.registerFunction('CIDR.masked(): CIDR', (c: CIDR) => new CIDR(new IP(mask(c.ip.bytes, c.prefix)), c.prefix));
  env.registerFunction('CIDR.prefixLength(): int', (c: CIDR) => BigInt(c.prefix));
  env.registerFunction('string(CIDR): string', (c: CIDR) => c.toString());
}
