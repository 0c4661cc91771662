/** What the table printers (printers.ts) share: column and printer types, cell helpers, the common columns. */
import { humanAge } from './age.ts';
import { isPlainObject, meta, type Obj } from './types.ts';

export interface ColumnDef {
  name: string;
  type: 'string' | 'integer' | 'boolean';
  description: string;
  /** 1: shown only by `-o wide`. */
  priority: 0 | 1;
}

export interface Printer {
  columns: readonly ColumnDef[];
  cells(o: Obj, now: number): unknown[];
}

export const NONE = '<none>';
export const list = (v: unknown): Obj[] => (Array.isArray(v) ? v.filter(isPlainObject) : []);
export const obj = (v: unknown): Obj => (isPlainObject(v) ? v : {});
export const num = (v: unknown): number => (typeof v === 'number' ? v : 0);
export const str = (v: unknown): string => (typeof v === 'string' ? v : '');

export const col = (name: string, type: ColumnDef['type'], description: string, priority: 0 | 1 = 0): ColumnDef => ({ name, type, description, priority });
export const NAME = col('Name', 'string', 'Name must be unique within a namespace.');
export const AGE = col('Age', 'string', 'CreationTimestamp is a timestamp representing the server time when this object was created.');
export const CONTAINERS = col('Containers', 'string', 'Names of each container in the template.', 1);
export const IMAGES = col('Images', 'string', 'Images referenced by each container in the template.', 1);
export const SELECTOR = col('Selector', 'string', 'Label selector for pods.', 1);

export const age = (o: Obj, now: number): string => humanAge(meta(o).creationTimestamp, now);

export function podSpecOf(template: unknown): Obj {
  return obj(obj(template)['spec']);
}

export function containerCells(podSpec: Obj): [string, string] {
  const cs = list(podSpec['containers']);
  return [cs.map((c) => str(c['name'])).join(','), cs.map((c) => str(c['image'])).join(',')];
}

/** metav1.FormatLabelSelector. */
export function formatLabelSelector(sel: unknown): string {
  if (!isPlainObject(sel)) return NONE;
  const parts: string[] = [];
  for (const [k, v] of Object.entries(obj(sel['matchLabels'])).sort(([a], [b]) => a.localeCompare(b))) parts.push(`${k}=${String(v)}`);
  for (const e of list(sel['matchExpressions'])) {
    const key = str(e['key']);
    const values = Array.isArray(e['values']) ? (e['values'] as unknown[]).map(String).sort() : [];
    switch (e['operator']) {
      case 'In': parts.push(`${key} in (${values.join(',')})`); break;
      case 'NotIn': parts.push(`${key} notin (${values.join(',')})`); break;
      case 'Exists': parts.push(key); break;
      case 'DoesNotExist': parts.push(`!${key}`); break;
      default: break;
    }
  }
  return parts.length ? parts.join(',') : NONE;
}

/** A plain map selector (Service, ReplicationController): "k=v,..." sorted. */
export function formatMap(m: unknown): string {
  const entries = Object.entries(obj(m)).sort(([a], [b]) => a.localeCompare(b));
  return entries.length ? entries.map(([k, v]) => `${k}=${String(v)}`).join(',') : NONE;
}
