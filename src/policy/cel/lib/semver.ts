// Hand-written, not npm `semver`: it accepts "v1.2.3" and " 1.2.3" in strict mode and refuses numbers above 2^53, where Kubernetes' blang/semver refuses any prefix and takes uint64.
/**
 * Kubernetes' semver library (1.33+, apiserver/pkg/cel/library/semverlib.go):
 * semver, isSemver, major, minor, patch, compareTo, isGreaterThan, isLessThan.
 * Strict Semantic Versioning 2.0.0; `semver(s, true)` / `isSemver(s, true)`
 * normalize a `v` prefix and missing minor/patch first.
 */
import type { Environment } from '@marcbachmann/cel-js';
import { celError } from './errors.ts';

const SEMVER = /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$/;

export class Semver {
  constructor(
    readonly major: bigint,
    readonly minor: bigint,
    readonly patch: bigint,
    readonly pre: readonly string[],
    readonly text: string,
  ) {}
  toString(): string {
    return this.text;
  }
}

function normalize(s: string): string {
  let v = s.startsWith('v') ? s.slice(1) : s;
  const m = /^(\d+)(?:\.(\d+))?(?:\.(\d+))?(.*)$/.exec(v);
  if (m) {
    const strip = (x: string | undefined): string => (x === undefined ? '0' : String(BigInt(x)));
    v = `${strip(m[1])}.${strip(m[2])}.${strip(m[3])}${m[4] ?? ''}`;
  }
  return v;
}

function parse(s: string, norm = false): Semver | undefined {
  const text = norm ? normalize(s) : s;
  const m = SEMVER.exec(text);
  if (!m) return undefined;
  return new Semver(BigInt(m[1] ?? '0'), BigInt(m[2] ?? '0'), BigInt(m[3] ?? '0'), m[4] ? m[4].split('.') : [], text);
}

function semver(s: string, norm = false): Semver {
  const v = parse(s, norm);
  if (!v) throw celError(`invalid semver: ${JSON.stringify(s)}`);
  return v;
}

function compare(a: Semver, b: Semver): number {
  for (const k of ['major', 'minor', 'patch'] as const) if (a[k] !== b[k]) return a[k] < b[k] ? -1 : 1;
  if (a.pre.length === 0 || b.pre.length === 0) return a.pre.length === b.pre.length ? 0 : a.pre.length === 0 ? 1 : -1;
  for (let i = 0; i < Math.max(a.pre.length, b.pre.length); i++) {
    const x = a.pre[i];
    const y = b.pre[i];
    if (x === undefined) return -1;
    if (y === undefined) return 1;
    const xn = /^\d+$/.test(x);
    const yn = /^\d+$/.test(y);
    if (xn && yn) {
      const d = BigInt(x) - BigInt(y);
      if (d !== 0n) return d < 0n ? -1 : 1;
    } else if (xn !== yn) return xn ? -1 : 1;
    else if (x !== y) return x < y ? -1 : 1;
  }
  return 0;
}

export function registerSemver(env: Environment): void {
  env.registerType('Semver', Semver);
  env.registerFunction('semver(string): Semver', (s: string) => semver(s));
  env.registerFunction('semver(string, bool): Semver', (s: string, n: boolean) => semver(s, n));
  env.registerFunction('isSemver(string): bool', (s: string) => parse(s) !== undefined);
  env.registerFunction('isSemver(string, bool): bool', (s: string, n: boolean) => parse(s, n) !== undefined);
  env.registerFunction('Semver.major(): int', (v: Semver) => v.major);
  env.registerFunction('Semver.minor(): int', (v: Semver) => v.minor);
  env.registerFunction('Semver.patch(): int', (v: Semver) => v.patch);
  env.registerFunction('Semver.compareTo(Semver): int', (a: Semver, b: Semver) => BigInt(compare(a, b)));
  env.registerFunction('Semver.isGreaterThan(Semver): bool', (a: Semver, b: Semver) => compare(a, b) > 0);
  env.registerFunction('Semver.isLessThan(Semver): bool', (a: Semver, b: Semver) => compare(a, b) < 0);
  env.registerFunction('string(Semver): string', (v: Semver) => v.toString());
}
