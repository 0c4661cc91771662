/**
 * Kubernetes' URL library (apiserver/pkg/cel/library/urls.go): url, isURL,
 * getScheme, getHost, getHostname, getPort, getEscapedPath, getQuery.
 * Like Go's url.ParseRequestURI, a URL must be absolute or an absolute path.
 */
import type { Environment } from '@marcbachmann/cel-js';
import { celError } from './errors.ts';

export class CelURL {
  constructor(
    readonly scheme: string,
    readonly host: string,
    readonly path: string,
    readonly rawQuery: string,
  ) {}
  toString(): string {
    return `${this.scheme ? `${this.scheme}://` : ''}${this.host}${this.path}${this.rawQuery ? `?${this.rawQuery}` : ''}`;
  }
}

const URI = /^(?:([a-zA-Z][a-zA-Z0-9+.-]*):)?(?:\/\/([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#.*)?$/;

function parse(s: string): CelURL | undefined {
  // eslint-disable-next-line no-control-regex -- Go's URL parser refuses ASCII control characters
  if (s === '' || /[\x00-\x1f\x7f]/.test(s)) return undefined;
  const m = URI.exec(s);
  if (!m) return undefined;
  const [, scheme = '', host = '', path = '', query = ''] = m;
  // ParseRequestURI: either an absolute URL (scheme) or an absolute path.
  if (scheme === '' && !path.startsWith('/')) return undefined;
  if (scheme === '' && m[2] !== undefined) return undefined;
  if (/\s/.test(host) || /\s/.test(scheme)) return undefined;
  if (/%(?![0-9a-fA-F]{2})/.test(path) || /%(?![0-9a-fA-F]{2})/.test(host)) return undefined;
  return new CelURL(scheme, host, path, query);
}

function url(s: string): CelURL {
  const u = parse(s);
  if (!u) throw celError(`URL parse error during conversion from string: ${JSON.stringify(s)} is not a valid absolute URL or absolute path`);
  return u;
}

function hostname(u: CelURL): string {
  const h = u.host.replace(/^[^@]*@/, '');
  if (h.startsWith('[')) return h.slice(1, h.indexOf(']'));
  const i = h.lastIndexOf(':');
  return i >= 0 ? h.slice(0, i) : h;
}

function port(u: CelURL): string {
  const h = u.host.replace(/^[^@]*@/, '');
  const close = h.lastIndexOf(']');
  const i = h.lastIndexOf(':');
  return i > close ? h.slice(i + 1) : '';
}

function query(u: CelURL): Record<string, string[]> {
  const out: Record<string, string[]> = Object.create(null) as Record<string, string[]>;
  if (u.rawQuery === '') return out;
  for (const part of u.rawQuery.split('&')) {
    if (part === '') continue;
    const eq = part.indexOf('=');
    const dec = (x: string): string => {
      try {
        return decodeURIComponent(x.replace(/\+/g, ' '));
      } catch {
        return x;
      }
    };
    const k = dec(eq < 0 ? part : part.slice(0, eq));
    const v = eq < 0 ? '' : dec(part.slice(eq + 1));
    (out[k] ??= []).push(v);
  }
  return out;
}

export function registerURL(env: Environment): void {
  env.registerType('URL', CelURL);
  env.registerFunction('url(string): URL', url);
  env.registerFunction('isURL(string): bool', (s: string) => parse(s) !== undefined);
  env.registerFunction('URL.getScheme(): string', (u: CelURL) => u.scheme);
  env.registerFunction('URL.getHost(): string', (u: CelURL) => u.host.replace(/^[^@]*@/, ''));
  env.registerFunction('URL.getHostname(): string', hostname);
  env.registerFunction('URL.getPort(): string', port);
  // Go's EscapedPath: characters outside a path's allowed set are percent-encoded.
  env.registerFunction('URL.getEscapedPath(): string', (u: CelURL) =>
    u.path.replace(/[^A-Za-z0-9\-._~!$&'()*+,;=:@/%]/gu, (c) => encodeURIComponent(c)),
  );
  env.registerFunction('URL.getQuery(): map<string, list<string>>', query);
  env.registerFunction('string(URL): string', (u: CelURL) => u.toString());
}
