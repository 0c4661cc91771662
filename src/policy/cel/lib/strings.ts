/**
 * The parts of cel-go's strings extension (version 2, as Kubernetes
 * configures it) that cel-js lacks: charAt, replace, strings.quote, format.
 * cel-js already has indexOf, lastIndexOf, lowerAscii, upperAscii, split,
 * substring, trim and join.
 */
import type { Environment } from '@marcbachmann/cel-js';
import { celError } from './errors.ts';
import { fromCel } from '../values.ts';

function charAt(s: string, i: bigint): string {
  const cps = [...s];
  const n = Number(i);
  if (n < 0 || n > cps.length) throw celError(`index out of range: ${n}`);
  return cps[n] ?? '';
}

/**
 * Go's strings.Replace, in time linear in the input and the result (the
 * previous slice-and-concatenate loop was quadratic: 131k replacements of one
 * character took minutes). An empty `from` matches before every code point
 * and at the end, as in Go.
 */
function replace(s: string, from: string, to: string, limit: number): string {
  if (limit === 0) return s;
  if (from === '') {
    const parts: string[] = [];
    let count = 0;
    const more = (): boolean => limit < 0 || count < limit;
    for (const ch of s) {
      if (more()) {
        parts.push(to);
        count++;
      }
      parts.push(ch);
    }
    if (more()) parts.push(to);
    return parts.join('');
  }
  // Native split and join: the first `limit` occurrences become `to`, the rest stay `from`.
  const pieces = s.split(from);
  if (limit < 0 || pieces.length - 1 <= limit) return pieces.join(to);
  return `${pieces.slice(0, limit + 1).join(to)}${from}${pieces.slice(limit + 1).join(from)}`;
}

function quote(s: string): string {
  let out = '"';
  for (const ch of s) {
    switch (ch) {
      case '\\': out += '\\\\'; break;
      case '"': out += '\\"'; break;
      case '\n': out += '\\n'; break;
      case '\r': out += '\\r'; break;
      case '\t': out += '\\t'; break;
      case '\b': out += '\\b'; break;
      case '\f': out += '\\f'; break;
      case '\v': out += '\\v'; break;
      case '\x07': out += '\\a'; break;
      default: out += ch;
    }
  }
  return out + '"';
}

/** CEL's string form of a value for %s. */
export function celString(v: unknown): string {
  if (v === null) return 'null';
  if (typeof v === 'string') return v;
  if (typeof v === 'bigint' || typeof v === 'boolean') return String(v);
  if (typeof v === 'number') return Number.isInteger(v) ? String(v) : String(v);
  if (Array.isArray(v)) return `[${v.map(celString).join(', ')}]`;
  if (v instanceof Uint8Array) return Buffer.from(v).toString('utf8');
  if (typeof v === 'object') {
    const j = fromCel(v);
    if (j !== null && typeof j === 'object' && !Array.isArray(j)) {
      return `{${Object.entries(j).map(([k, x]) => `${k}: ${celString(x)}`).join(', ')}}`;
    }
    return String(v);
  }
  return String(v);
}

function num(v: unknown, verb: string): number | bigint {
  if (typeof v === 'bigint' || typeof v === 'number') return v;
  if (v !== null && typeof v === 'object' && 'valueOf' in v) {
    const x = (v as { valueOf(): unknown }).valueOf();
    if (typeof x === 'bigint' || typeof x === 'number') return x;
  }
  throw celError(`format: %${verb} needs a number, got ${typeof v}`);
}

/** `'%s is %d'.format([a, b])`: the verbs cel-go supports. */
function format(fmt: string, args: unknown[]): string {
  let out = '';
  let argi = 0;
  for (let i = 0; i < fmt.length; i++) {
    const c = fmt[i];
    if (c !== '%') {
      out += c;
      continue;
    }
    let j = i + 1;
    let precision: number | undefined;
    const m = /^\.(\d+)/.exec(fmt.slice(j));
    if (m) {
      precision = Number(m[1]);
      j += m[0].length;
    }
    const verb = fmt[j];
    i = j;
    if (verb === '%') {
      out += '%';
      continue;
    }
    if (verb === undefined) throw celError('format: unterminated % at the end of the format string');
    if (argi >= args.length) throw celError(`format: index ${argi} out of range`);
    const a = args[argi++];
    switch (verb) {
      case 's': out += celString(a); break;
      case 'd': {
        const n = num(a, verb);
        if (typeof n === 'number' && !Number.isInteger(n)) throw celError('format: %d needs an integer');
        out += String(n);
        break;
      }
      case 'f': out += Number(num(a, verb)).toFixed(precision ?? 6); break;
      case 'e': {
        const s = Number(num(a, verb)).toExponential(precision ?? 6);
        out += s.replace(/e([+-])(\d)$/, 'e$10$2');
        break;
      }
      case 'x':
      case 'X': {
        let s: string;
        if (typeof a === 'string') s = Buffer.from(a, 'utf8').toString('hex');
        else if (a instanceof Uint8Array) s = Buffer.from(a).toString('hex');
        else s = num(a, verb).toString(16);
        out += verb === 'X' ? s.toUpperCase() : s;
        break;
      }
      case 'o': out += num(a, verb).toString(8); break;
      case 'b': out += typeof a === 'boolean' ? String(a) : num(a, verb).toString(2); break;
      default: throw celError(`format: unrecognized formatting clause %${verb}`);
    }
  }
  return out;
}

export function registerStrings(env: Environment): void {
  env.registerFunction('string.charAt(int): string', charAt);
  env.registerFunction('string.replace(string, string): string', (s: string, a: string, b: string) => replace(s, a, b, -1));
  env.registerFunction('string.replace(string, string, int): string', (s: string, a: string, b: string, n: bigint) => replace(s, a, b, Number(n)));
  env.registerFunction('string.reverse(): string', (s: string) => [...s].reverse().join(''));
  env.registerFunction('strings_quote(string): string', quote);
  env.registerFunction('string.format(list): string', format);
}
