/**
 * `Accept: application/json;as=Table;g=meta.k8s.io;v=v1` responses, which
 * `kubectl get` asks for. Built-in kinds with a kube-apiserver printer get
 * its columns and computed cells (printers.ts, `-o wide` columns at
 * priority 1); the rest get Name, their printer columns and Age.
 */
import type { PrinterColumn, ResourceDef } from './registry.ts';
import { humanAge } from './age.ts';
import { PRINTERS, type Printer } from './printers.ts';
import { isPlainObject, meta, type Obj } from './types.ts';

export function wantsTable(accept: string | undefined): boolean {
  return !!accept && /as=Table/.test(accept.split(',')[0] ?? '');
}

export { humanAge } from './age.ts';

/**
 * The JSONPath subset printer columns use: `.a.b[0].c` and the filter form
 * `.status.conditions[?(@.type=="Ready")].status` (first match, as kubectl
 * prints a single value per cell).
 */
function evalPath(o: unknown, path: string): unknown {
  const tokens = path.replace(/^\{?\.?/, '').replace(/\}$/, '').match(/\[\?\(@\.[^)]*\)\]|\[\d+\]|[^.[\]]+/g) ?? [];
  let cur = o;
  for (const t of tokens) {
    const filter = /^\[\?\(@\.([\w.-]+)\s*==\s*(?:"([^"]*)"|'([^']*)')\)\]$/.exec(t);
    if (filter) {
      if (!Array.isArray(cur)) return undefined;
      const [, field = '', dq, sq] = filter;
      const want = dq ?? sq;
      cur = cur.find((item) => isPlainObject(item) && String(evalPath(item, field)) === want);
      continue;
    }
    const index = /^\[(\d+)\]$/.exec(t);
    if (index) {
      if (!Array.isArray(cur)) return undefined;
      cur = cur[Number(index[1])];
    } else if (isPlainObject(cur)) cur = cur[t];
    else return undefined;
  }
  return cur;
}

function cell(col: PrinterColumn, o: Obj): unknown {
  const v = evalPath(o, col.jsonPath);
  if (col.type === 'date') return v === undefined ? '<unknown>' : humanAge(v);
  if (v === undefined || v === null) return col.type === 'string' ? '' : null;
  return typeof v === 'object' ? JSON.stringify(v) : v;
}

/** The built-in printer of `def`, if kube-apiserver has one we reproduce (printers.ts). */
function printerOf(def: ResourceDef): Printer | undefined {
  return def.builtin ? PRINTERS[`${def.group}/${def.resource}`] : undefined;
}

function columnDefs(def: ResourceDef): Obj[] {
  const printer = printerOf(def);
  if (printer) return printer.columns.map((c) => ({ name: c.name, type: c.type, format: c.name === 'Name' ? 'name' : '', description: c.description, priority: c.priority }));
  return [
    { name: 'Name', type: 'string', format: 'name', description: 'Name must be unique within a namespace.', priority: 0 },
    ...def.columns.map((c) => ({ name: c.name, type: c.type === 'date' ? 'string' : c.type, format: c.format ?? '', description: c.description ?? '', priority: c.priority ?? 0 })),
  ];
}

function row(def: ResourceDef, o: Obj, includeObject: string): Obj {
  const m = meta(o);
  const object = includeObject === 'Object' ? o
    : includeObject === 'None' ? undefined
      : { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: m };
  const printer = printerOf(def);
  const r: Obj = { cells: printer ? printer.cells(o, Date.now()) : [m.name, ...def.columns.map((c) => cell(c, o))] };
  if (object) r['object'] = object;
  return r;
}

export function toTable(def: ResourceDef, items: Obj[], listMeta: Obj, includeObject: string, withColumns = true): Obj {
  const t: Obj = { kind: 'Table', apiVersion: 'meta.k8s.io/v1', metadata: listMeta, rows: items.map((o) => row(def, o, includeObject)) };
  if (withColumns) t['columnDefinitions'] = columnDefs(def);
  return t;
}
