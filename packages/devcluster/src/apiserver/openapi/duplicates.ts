/**
 * Request bodies with duplicate keys, as kube-apiserver's strict decoders
 * report them: JSON `duplicate field "replicas"` (the key, as
 * sigs.k8s.io/json says it), YAML `yaml: unmarshal errors:\n  line 9: key
 * "replicas" already set in map`. The value kept is the last one, as both
 * Go decoders keep it.
 */
import YAML from 'yaml';
import { errors } from '../status.ts';

export interface DecodedBody { value: unknown; duplicates: string[] }

/** JSON.parse plus the duplicate keys of every object in the text, in order. */
export function parseJsonBody(raw: string): DecodedBody {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch (e) {
    throw errors.badRequest(`couldn't get version/kind; json parse error: ${(e as Error).message}`);
  }
  return { value, duplicates: raw.includes('{') ? jsonDuplicates(raw) : [] };
}

/** Scans valid JSON text: a stack of key sets, one per open object. */
function jsonDuplicates(raw: string): string[] {
  const out: string[] = [];
  const stack: (Set<string> | null)[] = [];
  let expectKey = false;
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i];
    if (c === '"') {
      let j = i + 1;
      while (raw[j] !== '"') j += raw[j] === '\\' ? 2 : 1;
      const top = stack[stack.length - 1];
      if (expectKey && top) {
        const key = JSON.parse(raw.slice(i, j + 1)) as string;
        if (top.has(key)) out.push(`duplicate field "${key}"`);
        top.add(key);
        expectKey = false;
      }
      i = j;
    } else if (c === '{') {
      stack.push(new Set());
      expectKey = true;
    } else if (c === '[') stack.push(null);
    else if (c === '}' || c === ']') stack.pop();
    else if (c === ',') expectKey = stack[stack.length - 1] !== null && stack.length > 0;
  }
  return out;
}

/** A YAML body (application/yaml): one document; duplicate keys reported with their line. */
export function parseYamlBody(raw: string): DecodedBody {
  const doc = YAML.parseDocument(raw, { uniqueKeys: false });
  if (doc.errors.length) throw errors.badRequest(`couldn't get version/kind; yaml parse error: ${doc.errors[0]!.message.split('\n')[0]!}`);
  const strict = YAML.parseDocument(raw, { uniqueKeys: true });
  const lines = strict.errors.filter((e) => e.code === 'DUPLICATE_KEY').map((e) => {
    const key = /"([^"]*)"|'([^']*)'|(\S+)/.exec(raw.slice(e.pos[0]).split(':')[0]!.trim());
    return `  line ${e.linePos?.[0].line ?? 0}: key "${key?.[1] ?? key?.[2] ?? key?.[3] ?? ''}" already set in map`;
  });
  return { value: doc.toJS() as unknown, duplicates: lines.length ? [`yaml: unmarshal errors:\n${lines.join('\n')}`] : [] };
}
