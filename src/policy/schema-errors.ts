/** Turns ajv errors into the dotted paths users read (`spec.containers[0].image`). */
import type { ErrorObject } from 'ajv';
import type { SchemaViolation } from './types.ts';

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$-]*$/;

function appendSegment(path: string, segment: string): string {
  if (/^(0|[1-9]\d*)$/.test(segment)) return `${path}[${segment}]`;
  if (IDENTIFIER.test(segment)) return path ? `${path}.${segment}` : segment;
  return `${path}[${JSON.stringify(segment)}]`;
}

/** `/spec/containers/0` -> `spec.containers[0]`, under an optional prefix. */
export function pointerToPath(pointer: string, prefix = ''): string {
  let path = prefix;
  if (pointer === '') return path;
  for (const raw of pointer.slice(1).split('/')) {
    path = appendSegment(path, raw.replace(/~1/g, '/').replace(/~0/g, '~'));
  }
  return path;
}

function show(value: unknown): string {
  const s = JSON.stringify(value);
  return s === undefined ? String(value) : s;
}

function describe(e: ErrorObject, prefix: string): SchemaViolation {
  let path = pointerToPath(e.instancePath, prefix);
  let message = e.message ?? `must pass "${e.keyword}"`;
  const params = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case 'required':
      path = appendSegment(path, String(params['missingProperty']));
      message = 'is required';
      break;
    case 'additionalProperties':
    case 'unevaluatedProperties':
      path = appendSegment(path, String(params[e.keyword === 'additionalProperties' ? 'additionalProperty' : 'unevaluatedProperty']));
      message = 'is not allowed';
      break;
    case 'const':
      message = `must be equal to ${show(params['allowedValue'])}`;
      break;
    case 'enum': {
      const allowed = (params['allowedValues'] as unknown[] | undefined) ?? [];
      const shown = allowed.slice(0, 6).map(show).join(', ');
      message = `must be one of ${shown}${allowed.length > 6 ? ', …' : ''}`;
      break;
    }
    case 'false schema':
      message = 'is not allowed';
      break;
    case 'not':
      message = 'is not allowed (matches a forbidden pattern)';
      break;
    default:
      break;
  }
  return { path: path || '(object)', message };
}

// Wrapper keywords whose own message adds nothing to their branches' errors.
const WRAPPERS: ReadonlySet<string> = new Set(['anyOf', 'oneOf', 'if', 'allOf', 'contains']);

/** Leaf-first, de-duplicated violations in ajv's order. */
export function toViolations(errors: readonly ErrorObject[], prefix = ''): SchemaViolation[] {
  const leaves = errors.filter((e) => !WRAPPERS.has(e.keyword));
  const chosen = leaves.length > 0 ? leaves : errors;
  const seen = new Set<string>();
  const out: SchemaViolation[] = [];
  for (const e of chosen) {
    const v = describe(e, prefix);
    const key = `${v.path}\u0000${v.message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(v);
  }
  return out;
}
