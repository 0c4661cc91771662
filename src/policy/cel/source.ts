/**
 * Source and AST rewrites that make cel-js read expressions the way the API
 * server does. Every rewrite keeps offsets unchanged, so error positions point
 * into the text the user wrote.
 */

/** CEL's reserved words, which Kubernetes escapes as `__{word}__` in field names. */
const RESERVED: ReadonlySet<string> = new Set([
  'true', 'false', 'null', 'in', 'as', 'break', 'const', 'continue', 'else', 'for', 'function', 'if',
  'import', 'let', 'loop', 'package', 'namespace', 'return', 'var', 'void', 'while',
]);
const ESCAPES: Record<string, string> = { underscores: '__', dot: '.', dash: '-', slash: '/' };

/**
 * Kubernetes' property-name unescaping (apiserver/pkg/cel/escaping.go):
 * `__dash__` → `-`, `__dot__` → `.`, `__slash__` → `/`, `__underscores__` →
 * `__`, and `__{keyword}__` → the keyword.
 */
export function unescapeFieldName(name: string): string {
  if (!name.includes('__')) return name;
  if (name.length > 4 && name.startsWith('__') && name.endsWith('__') && RESERVED.has(name.slice(2, -2))) {
    return name.slice(2, -2);
  }
  return name.replace(/__(underscores|dot|dash|slash)__/g, (_m, w: string) => ESCAPES[w] ?? _m);
}

/**
 * Namespaced functions (`sets.contains(…)`) that cel-js cannot declare: we
 * rename them `sets_contains`. Only these exact names, so that a comprehension
 * variable called `ip` or `format` keeps working.
 */
export const NAMESPACED_FUNCTIONS: Readonly<Record<string, readonly string[]>> = {
  sets: ['contains', 'equivalent', 'intersects'],
  strings: ['quote'],
  base64: ['encode', 'decode'],
  ip: ['isCanonical'],
  format: [
    'dns1123Label', 'dns1123Subdomain', 'dns1035Label', 'qualifiedName', 'dns1123LabelPrefix', 'dns1123SubdomainPrefix',
    'dns1035LabelPrefix', 'labelValue', 'uri', 'uuid', 'byte', 'date', 'datetime', 'named',
  ],
};
const NAMESPACE_CALL = new RegExp(
  `(?<![.\\w])(${Object.entries(NAMESPACED_FUNCTIONS).map(([ns, fns]) => `${ns}\\.(?:${fns.join('|')})`).join('|')})\\s*\\(`,
  'g',
);

/**
 * The source with string literal contents blanked (same length), so that
 * textual rewrites never touch what is inside a string.
 */
export function maskStrings(src: string): string {
  const out = src.split('');
  let i = 0;
  while (i < src.length) {
    const c = src[i];
    if (c === '"' || c === "'") {
      const triple = src.startsWith(c.repeat(3), i);
      const quote = triple ? c.repeat(3) : c;
      // Raw strings (r'…') do not process escapes.
      const prev = src[i - 1] ?? '';
      const raw = /[rR]/.test(prev) || (/[bB]/.test(prev) && /[rR]/.test(src[i - 2] ?? ''));
      let j = i + quote.length;
      while (j < src.length && !src.startsWith(quote, j)) {
        if (!raw && src[j] === '\\') j++;
        j++;
      }
      for (let k = i + quote.length; k < Math.min(j, src.length); k++) if (out[k] !== '\n') out[k] = ' ';
      i = j + quote.length;
      continue;
    }
    i++;
  }
  return out.join('');
}

/** Renames `ns.fn(` to `ns_fn(` outside string literals (same length). */
export function rewriteNamespacedCalls(src: string): string {
  const masked = maskStrings(src);
  let out = src;
  for (const m of masked.matchAll(NAMESPACE_CALL)) {
    const dot = m.index + (m[1] ?? '').indexOf('.');
    out = out.slice(0, dot) + '_' + out.slice(dot + 1);
  }
  return out;
}

/** The parts of a cel-js AST node we read. */
export interface AstNode {
  op: string;
  args: unknown;
  pos?: number;
  start?: number;
}

function isNode(v: unknown): v is AstNode {
  return v !== null && typeof v === 'object' && typeof (v as { op?: unknown }).op === 'string' && 'args' in v;
}

/** Visits every node the user wrote (macro expansions reuse these nodes). */
export function walk(node: unknown, visit: (n: AstNode) => void): void {
  if (!isNode(node)) return;
  visit(node);
  const visitAll = (v: unknown): void => {
    if (Array.isArray(v)) for (const x of v) visitAll(x);
    else if (isNode(v)) walk(v, visit);
  };
  visitAll(node.args);
}

/** Offset of a node in the source. */
export function offsetOf(n: AstNode): number {
  return n.start ?? n.pos ?? 0;
}

/** line/column (1-based) of an offset. */
export function lineColumn(src: string, offset: number): { line: number; column: number } {
  let line = 1;
  let col = 1;
  for (let i = 0; i < Math.min(offset, src.length); i++) {
    if (src[i] === '\n') {
      line++;
      col = 1;
    } else col++;
  }
  return { line, column: col };
}
